"""Which frames a video keeps and what size they become: the Qwen video processors' rules.

``sample_indices`` applies the config's sampling rule to a video's metadata; ``plan_video``
sizes the output (transformers' video smart_resize, Qwen2-VL's or Qwen3-VL's, with the optional
per-frame pixel cap) before any frame is decoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidVideoError
from ..video import sampling
from .families.qwen import smart_resize
from .video_config import QWEN2, VideoConfig


@dataclass(frozen=True)
class VideoPlan:
    """One video's output: sampled frame count, resize target and patch grid."""

    frames: int
    resize_w: int
    resize_h: int
    grid_t: int
    grid_h: int
    grid_w: int
    row_elems: int

    @property
    def elems(self) -> int:
        """Elements of the video's pixel_values_videos."""
        return self.grid_t * self.grid_h * self.grid_w * self.row_elems


def sample_indices(cfg: VideoConfig, meta: dict[str, Any]) -> np.ndarray:
    """The frames cfg's sampling keeps from a video with this metadata (transformers' rule).

    A Qwen3-VL video without a frame rate is sampled as 24 fps and its metadata says so."""
    total = int(meta["total_num_frames"])
    if cfg.rule == QWEN2:
        return sampling.qwen2(total, num_frames=cfg.num_frames, fps=cfg.fps,
                              video_fps=meta.get("fps"), temporal=cfg.temporal_patch_size,
                              min_frames=cfg.min_frames, max_frames=cfg.max_frames)
    if cfg.num_frames is None and cfg.fps is not None and meta.get("fps") is None:
        meta["fps"] = 24
    return sampling.qwen3(total, num_frames=cfg.num_frames, fps=cfg.fps,
                          video_fps=meta.get("fps"), min_frames=cfg.min_frames,
                          max_frames=cfg.max_frames)


def _qwen3_size(frames: int, height: int, width: int, temporal: int, factor: int,
                min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen3-VL's video smart_resize: the budget counts frames.

    Frames rounded to the temporal patch; frames smaller than factor are first scaled up."""
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    ratio = max(height, width) / min(height, width)
    if ratio > 200:
        raise ValueError(f"absolute aspect ratio must be smaller than 200, got {ratio:g}")
    t_bar = round(frames / temporal) * temporal
    return smart_resize(height, width, factor, min_pixels, max_pixels, frames=t_bar,
                        beta_frames=frames)


def plan_video(index: int, cfg: VideoConfig, frames: int, height: int,
               width: int) -> VideoPlan:
    """The output of a video of frames x height x width after sampling.

    InvalidVideoError for sizes the reference refuses."""
    if frames < 1:
        raise InvalidVideoError(index, "no frames to process")
    factor = cfg.patch_size * cfg.merge_size
    t = cfg.temporal_patch_size
    if cfg.rule == QWEN2:
        ratio = max(height, width) / min(height, width)
        if ratio > 200:
            raise InvalidVideoError(index, f"absolute aspect ratio must be smaller than 200, "
                                           f"got {ratio:g}")
        max_pixels = cfg.max_pixels
        if cfg.cap_pixels_per_frame:
            total_pixels = int(cfg.max_video_tokens * factor * factor * 0.9)
            max_pixels = max(min(max_pixels, total_pixels * t // frames),
                             int(cfg.min_pixels * 1.05))
        h, w = smart_resize(height, width, factor, cfg.min_pixels, max_pixels)
    else:
        if frames < t:
            raise InvalidVideoError(index, f"{frames} frames, fewer than the temporal patch "
                                           f"size {t}")
        max_pixels = cfg.max_pixels
        if cfg.cap_pixels_per_frame:
            per_frame = max(min(cfg.max_video_tokens * factor * factor, max_pixels // frames),
                            int(cfg.min_pixels * 1.05))
            max_pixels = per_frame * frames
        try:
            h, w = _qwen3_size(frames, height, width, t, factor, cfg.min_pixels, max_pixels)
        except ValueError as exc:
            raise InvalidVideoError(index, str(exc)) from None
    if h < factor or w < factor:
        raise InvalidVideoError(index, f"{width}x{height} resizes to an empty grid ({w}x{h})")
    grid_t = (frames + (-frames) % t) // t
    row = 3 * t * cfg.patch_size * cfg.patch_size
    return VideoPlan(frames, w, h, grid_t, h // cfg.patch_size, w // cfg.patch_size, row)


__all__ = ["VideoPlan", "plan_video", "sample_indices"]
