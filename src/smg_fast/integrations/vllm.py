"""vLLM plug-in: vLLM's multimodal processor computes Qwen2/2.5/3-VL and Kimi-K2.5 images with
smg-fast, bit for bit what transformers' processor would give.

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
transformers' Qwen2-VL or Kimi-K2.5 image processor class. Re-registering a model's multimodal
processor would instead replace vLLM's per-model class and break with its next refactor.

A call whose options smg-fast does not reproduce (``device="cuda"``, an unknown option, float
input with ``do_rescale=False`` and ``do_normalize=False``) is computed by transformers' own
class for that call, logged once per reason. If smg-fast's native module does not load, an
error is logged and vLLM keeps transformers' processors. Nothing from vLLM is imported here.
"""

from __future__ import annotations

import importlib.util
import logging
import os

# A child of vLLM's logger, so its lines go where vLLM's go, without importing vLLM.
logger = logging.getLogger("vllm.smg_fast")

ENV = "SMG_FAST_VLLM"
_state: dict[str, bool] = {}


def enabled() -> bool:
    """False when SMG_FAST_VLLM is 0 / false / off / no."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _share_vllm_handlers() -> None:
    """smg-fast's own log lines (per-call fallbacks) through vLLM's handlers when it has them."""
    ours, theirs = logging.getLogger("smg_fast"), logging.getLogger("vllm")
    if ours.handlers or not theirs.handlers:
        return
    for handler in theirs.handlers:
        ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


def register() -> bool:
    """vLLM's entry point: installs smg-fast's image processors in this process (once).
    Returns whether they are installed; never raises."""
    if "done" in _state:
        return _state["done"]
    _state["done"] = False
    if not enabled():
        logger.info("smg-fast: %s=0, vLLM keeps transformers' image processors", ENV)
        return False
    try:
        from .. import (
            _native,  # noqa: F401  (the native core: its failure is the likely one)
            hf,
        )
        from .._version import __version__
    except Exception as exc:  # an engine must start without us
        logger.error("smg-fast: cannot load (%s: %s); vLLM keeps transformers' image "
                     "processors", type(exc).__name__, exc)
        return False
    try:
        types = hf.register()
    except Exception as exc:
        logger.error("smg-fast: registering with transformers failed (%s: %s); vLLM keeps "
                     "transformers' image processors", type(exc).__name__, exc)
        return False
    _share_vllm_handlers()
    torchvision = importlib.util.find_spec("torchvision") is not None
    cls = hf.Qwen2VLImageProcessor if torchvision else hf.Qwen2VLImageProcessorPil
    logger.info("smg-fast %s: image processor for %s is smg_fast.hf.%s (%s numerics, as "
                "transformers resolves it here; backend= / use_fast pick the other)",
                __version__, ", ".join(types), cls.__name__,
                "torchvision" if torchvision else "PIL")
    _state["done"] = True
    return True


__all__ = ["ENV", "enabled", "register"]
