"""The built-in model families, one module each (its ``Family``: config, size rule, call
options, reference, drop-in). Importing this package registers them, in the order imported
here: that is the order of ``smg_fast.FAMILIES``, and ``qwen2_vl`` stays first (the default
everywhere)."""

from __future__ import annotations

# isort: off
from .qwen import QwenVLProcessor
from .kimi import KimiK25Processor
# isort: on

__all__ = ["KimiK25Processor", "QwenVLProcessor"]
