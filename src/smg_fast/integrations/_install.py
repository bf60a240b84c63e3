"""What the engine plug-ins share.

Install smg-fast's image processors into transformers' AutoImageProcessor registry (and its
video processors into AutoVideoProcessor's) once per process, or say why not, on the engine's own
logger."""

from __future__ import annotations

import importlib.util
import logging

from .._env import enabled

_done: dict[str, bool] = {}


def _share_handlers(engine_logger: str) -> None:
    """Sends smg-fast's own log lines through the engine's handlers.

    Those are per-call handoffs. Only when the engine's logger has handlers and smg-fast's logger
    has none."""
    ours, theirs = logging.getLogger("smg_fast"), logging.getLogger(engine_logger)
    if ours.handlers or not theirs.handlers:
        return
    for handler in theirs.handlers:
        ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False


def install(engine: str, env: str, logger: logging.Logger, *, late_line: bool = False) -> bool:
    """Registers smg-fast's classes for this process (once; later calls return the first answer).

    Returns whether they are in place; never raises. ``late_line``: if the engine has not configured
    logging yet, its INFO line waits for the first class load."""
    if engine in _done:
        return _done[engine]
    _done[engine] = False
    if not enabled(env):
        logger.info("smg-fast: %s=0, %s keeps transformers' image processors", env, engine)
        return False
    try:
        from .. import hf
        from .._version import __version__

        types = hf.register(engines=True)
    except Exception as exc:  # an engine must start without us
        logger.error("smg-fast: cannot install its image processors (%s: %s); %s keeps "
                     "transformers' image processors", type(exc).__name__, exc, engine)
        return False
    _share_handlers(logger.name.split(".")[0])
    videos = _install_videos(engine, logger)
    blocks = _use_single_blocks()
    torchvision = importlib.util.find_spec("torchvision") is not None
    cls = hf.Qwen2VLImageProcessor if torchvision else hf.Qwen2VLImageProcessorPil
    line = ("smg-fast %s: installed in %s for model types %s (for qwen2_vl "
            "smg_fast.hf.%s; %s numerics, as transformers resolves it here; backend= / use_fast "
            "pick the other); other model types keep transformers' image processors; %s; %s",
            __version__, engine, ", ".join(types), cls.__name__,
            "torchvision" if torchvision else "PIL", videos, blocks)
    if late_line and not logger.hasHandlers():
        hf.on_first_load(lambda: logger.info(*line))  # vLLM's offline LLM configures it later
    else:
        logger.info(*line)
    _done[engine] = True
    return True


def _use_single_blocks() -> str:
    """Turns on Pillow's single-block allocator where it may (pillow_blocks); says what it did."""
    from ..imaging import pillow_blocks

    if pillow_blocks.enable_from_env():
        return "large Pillow images kept in one block, read in place"
    return "Pillow's image blocks left as they are"


def _install_videos(engine: str, logger: logging.Logger) -> str:
    """Registers smg-fast's video processors (smg_fast.hf_video); says what it did. Never raises."""
    if importlib.util.find_spec("torchvision") is None:  # transformers' video classes need it
        return "videos keep transformers' video processors (no torchvision here)"
    try:
        from .. import hf_video

        types = hf_video.register()
    except Exception as exc:  # the image processors stay installed
        logger.error("smg-fast: cannot install its video processors (%s: %s); %s keeps "
                     "transformers' video processors", type(exc).__name__, exc, engine)
        return "videos keep transformers' video processors"
    return f"videos of {', '.join(types)} with smg_fast.hf_video's classes"


def why_transformers(engine: str, env: str, model_type: str) -> str:
    """Why a model of model_type computes images with transformers' class in this process."""
    if not enabled(env):
        return f"{env}=0"
    if not _done.get(engine):
        return "smg-fast failed to install"
    from ..processors.registry import registered

    for fam in registered():
        if fam.dropin is None or model_type not in fam.model_types:
            continue
        if not fam.dropin.auto_register:
            return f"smg-fast does not register {model_type} (its folders run remote code)"
        if not fam.dropin.in_engines:
            return f"smg-fast serves {model_type} but has not proven it inside {engine}"
        return (f"smg-fast serves {model_type}, but not this config: transformers' class "
                "computes it (logged once above)")
    return f"smg-fast does not serve {model_type}"


__all__ = ["enabled", "install", "why_transformers"]
