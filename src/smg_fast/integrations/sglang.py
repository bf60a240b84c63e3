"""SGLang plug-in: SGLang's multimodal processors compute Qwen2/2.5/3-VL and Kimi-K2.5 images
with smg-fast, bit for bit what transformers' image processor would give.

Installed as the entry point ``smg_fast`` in the ``sglang.srt.plugins`` group, which SGLang's
``load_plugins()`` runs in its processes (the engine / ``sglang serve`` process, where the
TokenizerManager builds the multimodal processor, and the scheduler, detokenizer and DP
controller), so ``pip install smg-fast`` is the whole setup. ``SMG_FAST_SGLANG=0`` (or SGLang's
own ``SGLANG_PLUGINS`` whitelist without ``smg_fast``) turns it off.

Why transformers' ``AutoImageProcessor`` registry and not ``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE``:
SGLang does not compute Qwen-VL images itself. ``get_processor`` builds transformers' processor
with ``AutoProcessor.from_pretrained`` and ``QwenVLImageProcessor`` (its per-model class) calls
``processor.image_processor(images=..., return_tensors="pt", **kwargs)``. Registering smg-fast's
classes there (``smg_fast.hf.register()``) changes only that object and leaves SGLang's own code
(prompt expansion, mrope positions, caching, hashing, transport) as it is. The external package
hook would instead replace SGLang's ``QwenVLImageProcessor`` with a subclass, tying smg-fast to
that class's internals and to the list of model classes it serves, which change between
releases; and it needs an environment variable, not just an install.

Which device: on a host without a GPU SGLang passes ``device="cpu"`` to the fast (torchvision)
image processor, which smg-fast computes. With a GPU, and the fast processor on (SGLang's
default), it passes ``device="cuda:N"``: smg-fast does not compute on the GPU, so those calls go
to transformers' own torchvision class, exactly as without the plug-in (logged once, by
``smg_fast.hf``). ``--image-processor-backend pil`` (or ``--disable-fast-image-processor``)
makes SGLang build the PIL class and pass no device: smg-fast computes those calls, exact to
transformers' PIL numerics.

One INFO line says which image processor SGLang's multimodal processor uses, logged when SGLang
builds it (through an ``AFTER`` hook of SGLang's plug-in ``HookRegistry`` on ``get_mm_processor``;
plug-ins load before SGLang configures logging, so a line at load time would not be shown).
If smg-fast's native module does not load, importing the plug-in raises an ImportError naming
the cause, which SGLang logs ("Failed to load plugin smg_fast") while keeping transformers'
processors; any later failure is logged here the same way. ``register`` never raises.
"""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger("sglang.smg_fast")

ENV = "SMG_FAST_SGLANG"
HOOK_TARGET = "sglang.srt.managers.multimodal_processor.get_mm_processor"
_state: dict[str, Any] = {}


def enabled() -> bool:
    """False when SMG_FAST_SGLANG is 0 / false / off / no."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _report(result: Any, *args: Any, **kwargs: Any) -> None:
    """The INFO line: which image processor the multimodal processor SGLang built calls."""
    try:
        image_processor = getattr(getattr(result, "_processor", None), "image_processor", None)
        if image_processor is None:
            return
        why = _state.get("why", "")
        logger.info("smg-fast: SGLang's %s computes images with %s%s", type(result).__name__,
                    _class_name(image_processor), f" ({why})" if why else "")
    except Exception:  # a log line must never break the engine
        pass


def _install_report_hook() -> bool:
    """Registers the reporting hook with SGLang's HookRegistry; False if SGLang has none."""
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        HookRegistry.register(HOOK_TARGET, _report, HookType.AFTER)
        return True
    except Exception:
        return False


def _install() -> tuple[bool, str]:
    """smg-fast's image processors registered with transformers, and a line saying so."""
    if not enabled():
        return False, f"{ENV}=0, SGLang keeps transformers' image processors"
    try:
        from .. import (
            _native,  # noqa: F401  (the native core: its failure is the likely one)
            hf,
        )
        from .._version import __version__
    except Exception as exc:  # an engine must start without us
        logger.error("smg-fast: cannot load (%s: %s); SGLang keeps transformers' image "
                     "processors", type(exc).__name__, exc)
        return False, f"smg-fast failed to load: {type(exc).__name__}"
    try:
        types = hf.register()
    except Exception as exc:
        logger.error("smg-fast: registering with transformers failed (%s: %s); SGLang keeps "
                     "transformers' image processors", type(exc).__name__, exc)
        return False, "smg-fast failed to register"
    return True, f"smg-fast {__version__} registered for {', '.join(types)}"


def register() -> bool:
    """SGLang's entry point: installs smg-fast's image processors in this process (once).
    Returns whether they are installed; never raises."""
    if "done" in _state:
        return _state["done"]
    _state["done"] = False
    try:
        done, why = _install()
    except Exception as exc:
        done, why = False, f"smg-fast plug-in error: {type(exc).__name__}: {exc}"
        logger.error("%s; SGLang keeps transformers' image processors", why)
    _state.update(done=done, why=why)
    if not _install_report_hook():
        logger.info("smg-fast: %s", why)
    return done


__all__ = ["ENV", "enabled", "register"]
