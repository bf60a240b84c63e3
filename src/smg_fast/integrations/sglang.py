"""SGLang plug-in: SGLang's multimodal processors compute Qwen2/2.5/3-VL images with smg-fast,
bit for bit what transformers' processor would give.

Installed as the entry point ``smg_fast`` in the ``sglang.srt.plugins`` group, which SGLang's
``load_plugins()`` runs early in its processes (``SGLANG_PLUGINS`` filters it);
``SMG_FAST_SGLANG=0`` turns it off. Like the vLLM plug-in it registers smg-fast's classes with
transformers' ``AutoImageProcessor`` (SGLang builds its processor with
``AutoProcessor.from_pretrained``), rather than replacing SGLang's own ``QwenVLImageProcessor``
through ``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE``: SGLang's prompt handling, caching and M-RoPE
code stay as they are, and nothing of SGLang's internals is relied on.

SGLang passes ``device="cuda:N"`` to a fast image processor on a GPU host: smg-fast computes on
the CPU, so those calls go to transformers' own class (on the GPU), logged once; on CPU hosts
(``device="cpu"``) smg-fast computes them. Nothing from SGLang is imported here.
"""

from __future__ import annotations

import logging

from ._install import install

# A child of SGLang's logger, so its lines go where SGLang's go, without importing SGLang.
logger = logging.getLogger("sglang.smg_fast")

ENV = "SMG_FAST_SGLANG"


def register() -> bool:
    """SGLang's entry point: installs smg-fast's image processors in this process (once).
    Returns whether they are installed; never raises."""
    return install("SGLang", ENV, logger)


__all__ = ["ENV", "register"]
