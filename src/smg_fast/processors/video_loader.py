"""``load_video_processor``: a family's video processor from its name or a model folder."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..video.container import VideoLimits
from .folders import hub_folder, is_hub_id
from .loader import make_processor, read_model_folder
from .processor import Processor
from .registry import check_config, get_family, names
from .video import VideoProcessor
from .video_config import RULE_OF_FAMILY, VideoConfig, build_video_config, folder_video_fields


def frame_processor(family: str, cfg: VideoConfig) -> Processor:
    """The family's torchvision-backend image processor that a video's frames go through.

    Temporal size 1 (VideoProcessor places the frames in their temporal slots), the video's
    normalization; its size rule is never used (the video plan sizes the frames)."""
    base = get_family(family).builtin
    img = dataclasses.replace(base, backend="torchvision", temporal_patch_size=1,
                              patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                              image_mean=tuple(cfg.image_mean), image_std=tuple(cfg.image_std),
                              rescale_factor=cfg.rescale_factor, resample=3,
                              min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)
    check_config(img)
    return make_processor(img)


def video_processor_for(family: str, fields: dict[str, Any],
                        limits: VideoLimits | None = None,
                        threads: int | None = None) -> VideoProcessor:
    """The video processor of family with fields over its reference class's defaults."""
    cfg = build_video_config(family, fields)
    return VideoProcessor(cfg, frame_processor(family, cfg), limits, threads)


def load_video_processor(name_or_dir: str | os.PathLike[str], *,
                         limits: VideoLimits | None = None, threads: int | None = None,
                         **overrides: Any) -> VideoProcessor:
    """A video processor for a family name, a model folder or a hub id.

    A family name takes the reference class's defaults; a folder its
    video_preprocessor_config.json, else its preprocessor_config.json.
    Overrides (``fps=...``, ``max_pixels=...``, ``do_sample_frames=...``) win. ``threads``: FFmpeg
    decoder threads per video (None: PyAV's defaults, as transformers' loader)."""
    key = os.fspath(name_or_dir)
    if key in names():
        return video_processor_for(key, overrides, limits, threads)
    if is_hub_id(key):
        key = hub_folder(key)
    if not os.path.isdir(key):
        raise ValueError(f"unknown processor {key!r}: use one of {sorted(RULE_OF_FAMILY)} or a "
                         "model folder")
    fam, _ = read_model_folder(key)
    return video_processor_for(fam.name, {**folder_video_fields(key), **overrides}, limits,
                               threads)


__all__ = ["frame_processor", "load_video_processor", "video_processor_for"]
