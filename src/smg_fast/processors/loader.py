"""``load_processor``: a processor from a family name, a model folder or a hub id.

The backend is the one an engine would run for it."""

from __future__ import annotations

import logging
import os
from typing import Any

from .config import ProcessorConfig
from .families.pixtral_mistral import folder_fields as mistral_fields
from .families.pixtral_mistral import is_mistral_folder
from .folders import hub_folder, image_processor_fields, is_hub_id, read_json
from .processor import Processor
from .registry import Family, build_config, get_family, names, registered
from .video import VideoProcessor
from .video_config import RULE_OF_FAMILY, folder_video_fields
from .video_loader import video_processor_for

logger = logging.getLogger("smg_fast")


def _family_of_folder(folder: str, pre: dict[str, Any]) -> Family:
    """The family of a model folder.

    Its config.json's model_type, else the family that recognizes its preprocessor_config.json."""
    cfg_path = os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        model_type = read_json(cfg_path).get("model_type")
        for fam in registered():
            if model_type in fam.model_types:
                return fam
        if model_type is not None:
            for fam in registered():
                if fam.unambiguous and fam.recognizes(pre):
                    return fam
            known = sorted(t for f in registered() for t in f.model_types)
            raise ValueError(f"{cfg_path}: unsupported model_type {model_type!r}; "
                             f"supported: {known}")
    # unambiguous formats first (Kimi's media_proc_cfg wins over a Qwen processor type)
    for fam in sorted(registered(), key=lambda f: not f.unambiguous):
        if fam.recognizes(pre):
            return fam
    raise ValueError(f"{folder}: cannot tell the model family (no config.json model_type and "
                     "a preprocessor_config.json no registered family recognizes)")


def read_model_folder(folder: str) -> tuple[Family, dict[str, Any]]:
    """(family, its image processor's settings) of a model folder.

    The settings as transformers reads them: processor_config.json's nested image_processor
    object, else preprocessor_config.json."""
    pre = image_processor_fields(folder)
    return _family_of_folder(folder, pre), pre


def resolve_config(name_or_dir: str | os.PathLike[str],
                   overrides: dict[str, Any]) -> ProcessorConfig:
    """A family name or a HuggingFace model folder, then overrides (which win)."""
    key = os.fspath(name_or_dir)
    if key in names():
        return build_config(key, overrides)
    if os.path.isdir(key) and is_mistral_folder(key, overrides.get("backend")):  # mistral_common
        return build_config("pixtral", {**mistral_fields(key), **overrides})
    if os.path.isdir(key):
        fam, pre = read_model_folder(key)
        return build_config(fam.name, {**fam.folder_defaults, **fam.read_folder(pre),
                                       **overrides})
    if os.sep in key or key.startswith((".", "~")):
        raise ValueError(f"no such model folder: {key!r} (built-in families: "
                         f"{', '.join(names())})")
    raise ValueError(f"unknown processor {key!r}: use one of {names()} or a model folder")


def make_processor(config: ProcessorConfig) -> Processor:
    """The processor its family registered for config."""
    proc: Processor = get_family(config.family).processor(config)
    return proc


def load_processor(name_or_dir: str | os.PathLike[str], backend: str | None = None,
                   **overrides: Any) -> Processor:
    """A processor for a family name, a HuggingFace model folder or a hub id.

    A hub id is looked up in the local Hugging Face cache, else downloaded unless HF_HUB_OFFLINE
    is set (its preprocessor_config.json and config.json only).

    ``backend``: the reference reproduced bit for bit. None: for a folder (or hub id), what
    transformers' ``AutoImageProcessor`` would resolve for it in an engine's environment:
    "torchvision" when its preprocessor_config.json names the torchvision class
    (``Qwen2VLImageProcessor``, ``...Fast``, ``Kimi_K25ImageProcessor``: what vLLM and SGLang
    run), "pil" when it names ``Qwen2VLImageProcessorPil`` (each family's ``folder_backend``);
    for a family name the family's default: "pil" for Qwen, "upstream" (Kimi's own NumPy/PIL
    code) for Kimi-K2.5. torch is not needed either way. ``repr(processor)`` and one INFO log
    line say which and why. Overrides (e.g. ``min_pixels=..., max_pixels=...,
    max_image_pixels=...``) win over the folder's or family's values."""
    key = os.fspath(name_or_dir)
    why = "backend= given" if backend is not None else "the family's default"
    if key not in names() and is_hub_id(key):
        key = hub_folder(key)
    if backend is None and key not in names() and os.path.isdir(key) and is_mistral_folder(key):
        why = "a Mistral-format folder (params.json with a vision_encoder): mistral_common"
    elif backend is None and key not in names() and os.path.isdir(key):
        fam, pre = read_model_folder(key)
        backend, why = fam.folder_backend(str(pre.get("image_processor_type") or ""))
        why = why if backend is not None else f"{why} (the family's default)"
    if backend is not None:
        overrides = {**overrides, "backend": backend}
    proc = make_processor(resolve_config(key, overrides))
    proc.backend_reason = why
    if proc.config.family in RULE_OF_FAMILY:  # proc(videos=...): made on the first video
        proc.video_factory = lambda: load_video_processor(key)
    logger.info("smg-fast: %s uses backend %r: %s", os.fspath(name_or_dir), proc.config.backend,
                why)
    return proc


def load_video_processor(name_or_dir: str | os.PathLike[str], *, limits: Any = None,
                         threads: int | None = None, decoder: str = "pyav",
                         skip: bool = True, **overrides: Any) -> VideoProcessor:
    """A video processor for a family name, a model folder or a hub id.

    A family name takes transformers' video processor class defaults; a folder its
    video_preprocessor_config.json, else its preprocessor_config.json (as AutoVideoProcessor).
    Overrides (``fps=...``, ``max_pixels=...``, ``do_sample_frames=...``) win. ``limits``: a
    ``smg_fast.video.VideoLimits``; ``threads``: FFmpeg decoder threads per video (None: PyAV's
    defaults, as transformers' loader); ``decoder``: whose RGB conversion and metadata encoded
    videos get by default (``pyav``, ``torchcodec``, ``opencv``; docs/video.md); ``skip``: the
    skip decode (True: non-reference frames not sampled are not decoded; False: every frame up
    to the last sampled one, as the reference's loader, exact on damaged streams too)."""
    key = os.fspath(name_or_dir)
    if key in names():
        return video_processor_for(key, overrides, limits, threads, decoder, skip)
    if is_hub_id(key):
        key = hub_folder(key)
    if not os.path.isdir(key):
        raise ValueError(f"unknown processor {key!r}: use one of {sorted(RULE_OF_FAMILY)} or a "
                         "model folder")
    fam, _ = read_model_folder(key)
    return video_processor_for(fam.name, {**folder_video_fields(key), **overrides}, limits,
                               threads, decoder, skip)


__all__ = ["load_processor", "load_video_processor", "make_processor", "read_model_folder",
           "resolve_config"]
