"""vLLM plug-in.

VLLM's multimodal processor computes Qwen2/2.5/3-VL, GLM-4.1V/4.5V/4.6V/OCR and Gemma 3 images
with smg-fast, bit for bit what transformers' processor would give.

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
transformers' Qwen-VL or GLM image processor classes. Re-registering a model's multimodal
processor would instead replace vLLM's per-model class and break with its next refactor.

When vLLM builds a model's HF processor (``InputProcessingContext.get_hf_processor``, wrapped
here), one INFO line per model names the image processor class that processor calls: smg-fast's,
or transformers' and why (model type not served, not proven inside vLLM, ``SMG_FAST_VLLM=0``).
The line written at load says only what was installed.

Videos: the same install registers smg-fast's Qwen2-VL / Qwen3-VL video processors
(``smg_fast.hf_video``) with transformers' ``AutoVideoProcessor``. vLLM decodes a request's video
with its own loader and calls the video processor its HF processor holds on the frames (Qwen2-VL
with ``do_rescale=False, do_normalize=False`` in vLLM's device-normalize default, which smg-fast
computes as transformers' uint8 patches; Qwen3-VL once per video with vLLM's ``VideoMetadata``);
a second per-model line names that class.

A call whose options smg-fast does not reproduce (``device="cuda"``, an unknown option, float
input with ``do_rescale=False`` and ``do_normalize=False``) is computed by transformers' own
class for that call, logged once per reason. If smg-fast's native module does not load,
importing this module raises an ImportError naming the cause, which vLLM's plug-in loader logs
("Failed to load plugin smg_fast") before going on with transformers' processors.

With the processors in place it also registers the ``smg_fast`` media connector
(``vllm_media.py``: a request's JPEG images stay undecoded until smg-fast's processor decodes them
natively) and, while ``VLLM_MEDIA_CONNECTOR`` is unset, puts it in place of vLLM's default
``http`` connector in this process (an explicit ``VLLM_MEDIA_CONNECTOR`` wins;
``SMG_FAST_VLLM_DECODE=0`` keeps vLLM's own decoding). vLLM is imported only for that, when
the plug-in runs.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from typing import Any

from . import vllm_media
from ._install import enabled, install, why_transformers

# A child of vLLM's logger, so its lines go where vLLM's go, without importing vLLM.
logger = logging.getLogger("vllm.smg_fast")

ENV = "SMG_FAST_VLLM"


def register() -> bool:
    """vLLM's entry point.

    Installs smg-fast's image processors in this process (once), then its media connector.
    Returns whether the processors are installed; never raises."""
    installed = install("vLLM", ENV, logger, late_line=True)
    _use_connector(installed)
    _install_report_hook()
    return installed


_reported: set[tuple[str, str]] = set()


def _report(ctx: Any, processor: Any) -> None:
    """The per-model INFO lines: which image (and video) processor classes the HF processor calls.

    Once per model and class (a request's mm_processor_kwargs may build another). Never raises."""
    try:
        image_processor = getattr(processor, "image_processor", None)
        if image_processor is None:
            return
        cls = type(image_processor)
        name = f"{cls.__module__}.{cls.__qualname__}"
        model = str(ctx.model_config.model)
        if (model, name) in _reported:
            return
        _reported.add((model, name))
        model_type = getattr(ctx.model_config.hf_config, "model_type", None) or "?"
        why = (_serves(image_processor, model_type) if name.startswith("smg_fast.")
               else why_transformers("vLLM", ENV, model_type))
        logger.info("smg-fast: vLLM's %s for %s (%s) computes images with %s (%s)",
                    type(processor).__name__, model, model_type, name, why)
        _report_videos(processor, model, model_type)
    except Exception:  # a log line must never break the engine
        pass


def _serves(image_processor: Any, model_type: str) -> str:
    """Why smg-fast's class computes a model's images: its model type, or the class it names.

    A folder of a model type no family serves gets a drop-in by naming its class (Pixtral's
    llava folders, PaliGemma's SigLIP)."""
    from ..processors.registry import registered

    if any(model_type in f.model_types for f in registered() if f.dropin is not None):
        return f"smg-fast serves {model_type}"
    name = type(image_processor).__name__
    family = next((f.name for f in registered()
                   if f.dropin is not None and name in f.dropin.classes), "?")
    return f"smg-fast serves {family}, whose {name} this {model_type} folder names"


def _report_videos(processor: Any, model: str, model_type: str) -> None:
    """The per-model line for the video processor the HF processor calls, when it has one."""
    video_processor = getattr(processor, "video_processor", None)
    if video_processor is None:
        return
    cls = type(video_processor)
    name = f"{cls.__module__}.{cls.__qualname__}"
    ours = name.startswith("smg_fast.")
    why = ("smg-fast serves its videos" if ours else f"{ENV}=0" if not enabled(ENV)
           else "smg-fast does not serve its videos")
    logger.info("smg-fast: vLLM's %s for %s (%s) computes videos with %s (%s)",
                type(processor).__name__, model, model_type, name, why)


def _install_report_hook() -> None:
    """Wraps vLLM's ``InputProcessingContext.get_hf_processor`` to report each model's class.

    vLLM's processing code builds transformers' processor through it for most models (every
    family smg-fast serves, LLaVA, ...; a few call ``cached_get_processor`` themselves), so the
    line names what a model actually uses, served by smg-fast or not. Once per process; a vLLM
    without it gets no line."""
    if importlib.util.find_spec("vllm") is None:
        return
    try:
        from vllm.multimodal.processing import InputProcessingContext

        original = InputProcessingContext.get_hf_processor
        if getattr(original, "_smg_fast_report", False):
            return

        @functools.wraps(original)
        def get_hf_processor(self: Any, *args: Any, **kwargs: Any) -> Any:
            processor = original(self, *args, **kwargs)
            _report(self, processor)
            return processor

        get_hf_processor._smg_fast_report = True  # type: ignore[attr-defined]
        InputProcessingContext.get_hf_processor = get_hf_processor  # type: ignore[method-assign]
    except Exception as exc:  # another vLLM: no per-model line, nothing breaks
        logger.debug("smg-fast: no per-model line (%s: %s)", type(exc).__name__, exc)


def _use_connector(installed: bool) -> None:
    """Registers the media connector; vLLM's default in this process unless told otherwise.

    With ``VLLM_MEDIA_CONNECTOR`` unset it takes the place of vLLM's default ``http`` connector
    in this process (no environment variable is set, so a child process that does not load the
    plug-in keeps vLLM's own); ``VLLM_MEDIA_CONNECTOR=smg_fast`` names it explicitly."""
    if importlib.util.find_spec("vllm") is None:  # called outside vLLM: nothing to connect
        return
    chosen = os.environ.get("VLLM_MEDIA_CONNECTOR")
    if chosen not in (None, vllm_media.NAME):
        if installed:
            logger.info("smg-fast: VLLM_MEDIA_CONNECTOR=%s is set, so vLLM decodes request images "
                        "with it (the smg_fast connector leaves JPEGs to smg-fast's decoder)",
                        chosen)
        return
    as_default = chosen is None
    if as_default:
        if not installed:
            return
        if not enabled(vllm_media.ENV):
            logger.info("smg-fast: %s=0, vLLM decodes request images itself", vllm_media.ENV)
            return
    why_not = vllm_media.register(logger, as_default=as_default)
    if why_not is not None:
        (logger.info if as_default else logger.error)(
            "smg-fast: vLLM decodes request images itself: %s", why_not)


__all__ = ["ENV", "register"]
