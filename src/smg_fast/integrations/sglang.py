"""SGLang plug-in.

SGLang's multimodal processors compute Qwen2/2.5/3-VL, GLM-4.1V/4.5V/4.6V/OCR and Gemma 3 images
with smg-fast, bit for bit what transformers' processor would give.

Installed as the entry point ``smg_fast`` in the ``sglang.srt.plugins`` group, which SGLang's
``load_plugins()`` runs early in its processes (the engine / ``sglang serve`` process, where the
TokenizerManager builds the multimodal processor, and the scheduler, detokenizer and DP
controller; ``SGLANG_PLUGINS`` filters it); ``SMG_FAST_SGLANG=0`` turns it off. Like the vLLM
plug-in it registers smg-fast's classes with transformers' ``AutoImageProcessor`` (SGLang's
``get_processor`` builds its processor with ``AutoProcessor.from_pretrained``, and its
``QwenVLImageProcessor`` calls ``processor.image_processor(images=..., return_tensors="pt")``),
rather than replacing SGLang's own ``QwenVLImageProcessor`` through
``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE``: that hook needs an environment variable besides the
install and a subclass tied to SGLang's class internals and model list, which change between
releases, while at transformers' level SGLang's prompt handling, caching, hashing and M-RoPE
code stay as they are. SGLang's Rust server keys its resize on the image processor's class
name, which smg-fast's classes share with transformers'.

Which device: on a host without a GPU SGLang's fast (torchvision) image processor is called on
the CPU (``device="cpu"`` or none), which smg-fast computes. On a GPU host, with the fast
processor (SGLang's default), SGLang passes ``device="cuda:N"`` and decodes JPEGs with nvJPEG
into GPU tensors: smg-fast computes on the CPU, so those calls go to transformers' own class (on
the GPU), exactly as without the plug-in, logged once by ``smg_fast.hf``.
``--image-processor-backend pil`` makes SGLang build the PIL class and pass no device (smg-fast
computes those calls on CPU hosts, tested); on a GPU host SGLang still decodes JPEGs with nvJPEG
into GPU tensors by default, a case not tested here.

Videos: the same install registers smg-fast's Qwen2-VL / Qwen3-VL video processors
(``smg_fast.hf_video``) with transformers' ``AutoVideoProcessor``; SGLang decodes a request's video
(torchcodec, else decord), samples and resizes its frames itself and calls the video processor
its HF processor holds on them (Qwen3-VL with its metadata and ``do_sample_frames=False``).

The INFO line that shows in SGLang's log is written when SGLang builds its multimodal processor
(an ``AFTER`` hook of SGLang's plug-in ``HookRegistry`` on ``get_mm_processor``): it names the
image processor class in use and why. Plug-ins run before SGLang configures logging, so the line
the shared installer writes at load time is usually not shown. If smg-fast's native module does
not load, importing the plug-in raises an ImportError naming the cause, which SGLang logs
("Failed to load plugin smg_fast") while keeping transformers' processors. Nothing from SGLang
is imported at module level, and ``register`` never raises.
"""

from __future__ import annotations

import logging
from typing import Any

from ._install import enabled, install

# A child of SGLang's logger, so its lines go where SGLang's go, without importing SGLang.
logger = logging.getLogger("sglang.smg_fast")

ENV = "SMG_FAST_SGLANG"
HOOK_TARGET = "sglang.srt.managers.multimodal_processor.get_mm_processor"
_why: dict[str, str] = {}


def _report(result: Any, *args: Any, **kwargs: Any) -> None:
    """The INFO lines: the image (and video) processor classes SGLang's mm processor calls."""
    try:
        image_processor = getattr(getattr(result, "_processor", None), "image_processor", None)
        if image_processor is None:
            return
        cls = type(image_processor)
        why = _why.get("why", "smg-fast not installed")
        logger.info("smg-fast: SGLang's %s computes images with %s.%s (%s)",
                    type(result).__name__, cls.__module__, cls.__qualname__, why)
        video_processor = getattr(result._processor, "video_processor", None)
        if video_processor is not None:
            cls = type(video_processor)
            logger.info("smg-fast: SGLang's %s computes videos with %s.%s (%s)",
                        type(result).__name__, cls.__module__, cls.__qualname__, why)
    except Exception:  # a log line must never break the engine
        pass


def _install_report_hook() -> None:
    """Registers the reporting hook with SGLang's HookRegistry, when this SGLang has one."""
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        HookRegistry.register(HOOK_TARGET, _report, HookType.AFTER)
    except Exception:
        pass


def register() -> bool:
    """SGLang's entry point.

    Installs smg-fast's image processors in this process (once). Returns whether they are installed;
    never raises."""
    first = "why" not in _why
    done = install("SGLang", ENV, logger)
    if first:
        _why["why"] = ("smg-fast installed" if done else
                       f"{ENV}=0" if not enabled(ENV) else "smg-fast failed to install")
        _install_report_hook()
    return done


__all__ = ["ENV", "register"]
