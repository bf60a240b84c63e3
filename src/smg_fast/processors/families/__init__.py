"""The built-in model families, one module each, registered in the order imported here.

Each module declares its ``Family``: config, size rule, call options, reference, drop-in. The
import order is the order of ``smg_fast.FAMILIES``, and ``qwen2_vl`` stays first (the default
everywhere)."""

from __future__ import annotations

# isort: off
from .qwen import QwenVLProcessor
from .kimi import KimiK25Processor
from .glm4v import Glm4vProcessor
from .paddleocr_vl import PaddleOCRVLProcessor
from . import ernie4_5_vl  # noqa: F401  (registers the family)
from .hunyuan_vl import HunyuanVLProcessor
from .gemma3 import Gemma3Processor
from .kimi_vl import KimiVLProcessor
from . import keye  # noqa: F401  (registers the family)
from .gemma4 import Gemma4Processor
from .gemma3n import Gemma3nProcessor
from .internvl import InternVLProcessor
from .pixtral import PixtralProcessor
from .llava_next import LlavaNextProcessor
from .llava_onevision import LlavaOnevisionProcessor
from .idefics3 import Idefics3Processor
from .llama4 import Llama4Processor
from .phi4_multimodal import Phi4MultimodalProcessor
# isort: on

__all__ = ["Gemma3Processor", "Glm4vProcessor", "HunyuanVLProcessor", "KimiK25Processor",
           "PaddleOCRVLProcessor", "QwenVLProcessor"]
__all__ += ["KimiVLProcessor"]
__all__ += ["Gemma3nProcessor", "Gemma4Processor"]
__all__ += ["InternVLProcessor", "PixtralProcessor"]
__all__ += ["LlavaNextProcessor", "LlavaOnevisionProcessor"]
__all__ += ["Idefics3Processor"]
__all__ += ["Llama4Processor"]
__all__ += ["Phi4MultimodalProcessor"]
