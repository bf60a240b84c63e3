"""A family's video processor from its video settings, over its frames' image processor."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..video.container import VideoLimits
from .processor import Processor
from .registry import check_config, get_family
from .video import VideoProcessor
from .video_config import VideoConfig, build_video_config


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
    proc: Processor = get_family(family).processor(img)
    return proc


def video_processor_for(family: str, fields: dict[str, Any],
                        limits: VideoLimits | None = None,
                        threads: int | None = None, decoder: str = "pyav",
                        skip: bool = True) -> VideoProcessor:
    """The video processor of family with fields over its reference class's defaults."""
    cfg = build_video_config(family, fields)
    return VideoProcessor(cfg, frame_processor(family, cfg), limits, threads, decoder, skip)


__all__ = ["frame_processor", "video_processor_for"]
