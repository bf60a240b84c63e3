"""vLLM plug-in.

VLLM's multimodal processor computes Qwen2/2.5/3-VL images with smg-fast, bit for bit what
transformers' processor would give.

Installed as the entry point ``smg_fast`` in the ``vllm.general_plugins`` group, which vLLM
calls in every process it starts (API server, engine core, workers), so ``pip install
smg-fast`` is the whole setup. ``SMG_FAST_VLLM=0`` (or vLLM's own ``VLLM_PLUGINS`` filter)
turns it off.

Why through transformers' ``AutoImageProcessor.register(..., exist_ok=True)`` and not vLLM's
``MULTIMODAL_REGISTRY``: vLLM does not compute images itself, it builds transformers' processor
(``ctx.get_hf_processor`` -> ``Qwen2VLProcessor.from_pretrained`` -> ``AutoImageProcessor``) and
calls it. Registering at that layer leaves all of vLLM's own code (prompt updates, placeholder
counting, caching, ``mm_processor_kwargs``, device-side normalization) as it is, touches no vLLM
internal that changes between releases, and applies to every model whose processor names
transformers' Qwen2-VL image processor classes. Re-registering a model's multimodal
processor would instead replace vLLM's per-model class and break with its next refactor.

A call whose options smg-fast does not reproduce (``device="cuda"``, an unknown option, float
input with ``do_rescale=False`` and ``do_normalize=False``) is computed by transformers' own
class for that call, logged once per reason. If smg-fast's native module does not load,
importing this module raises an ImportError naming the cause, which vLLM's plug-in loader logs
("Failed to load plugin smg_fast") before going on with transformers' processors. Nothing from
vLLM is imported here.
"""

from __future__ import annotations

import logging

from ._install import install

# A child of vLLM's logger, so its lines go where vLLM's go, without importing vLLM.
logger = logging.getLogger("vllm.smg_fast")

ENV = "SMG_FAST_VLLM"


def register() -> bool:
    """vLLM's entry point.

    Installs smg-fast's image processors in this process (once). Returns whether they are installed;
    never raises."""
    return install("vLLM", ENV, logger, late_line=True)


__all__ = ["ENV", "register"]
