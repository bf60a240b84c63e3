"""Which frames a video processor keeps: transformers' sampling rules, without torch.

``uniform`` is ``video_utils.default_sample_indices_fn`` (``load_video``'s own sampling),
``qwen2`` the Qwen2-VL video processor's (also Qwen2.5-VL's) and ``qwen3`` Qwen3-VL's. Each
raises ValueError where transformers raises."""

from __future__ import annotations

import math

import numpy as np


def _need_fps(video_fps: float | None) -> float:
    if video_fps is None:
        raise ValueError("sampling by fps needs the video's frame rate (its metadata's fps)")
    return video_fps


def uniform(total: int, num_frames: int | None = None, fps: float | None = None,
            video_fps: float | None = None) -> np.ndarray:
    """``default_sample_indices_fn``: num_frames (or fps x duration) frames, evenly spaced."""
    if num_frames is None and fps is not None:
        num_frames = max(1, int(total / _need_fps(video_fps) * fps))
    if num_frames is None:
        return np.arange(total, dtype=np.int64)
    if num_frames > total:
        raise ValueError(f"num_frames={num_frames} exceeds the video's {total} frames")
    return np.arange(num_frames, dtype=np.int64) * total // num_frames


def qwen2(total: int, *, num_frames: int | None, fps: float | None, video_fps: float | None,
          temporal: int, min_frames: int, max_frames: int) -> np.ndarray:
    """Qwen2-VL's ``sample_frames``: frame count rounded to the temporal patch.

    The indices are ``torch.arange(0, total, total / n).int()``: positions computed in float64,
    stored as float32, truncated (what torch's CPU arange does; tests compare with torch)."""
    if fps is not None and num_frames is not None:
        raise ValueError("`num_frames` and `fps` are mutually exclusive arguments, please use "
                         "only one!")
    n: float | None
    if num_frames is not None:
        n = round(num_frames / temporal) * temporal
    elif fps is not None:
        top = math.floor(min(max_frames, total) / temporal) * temporal
        n = total / _need_fps(video_fps) * fps
        n = math.floor(min(max(n, min_frames), top, total) / temporal) * temporal
    else:
        n = None
    if n is None:
        return np.arange(total, dtype=np.int64)
    if n > total:
        raise ValueError(f"Video can't be sampled. The inferred `num_frames={n}` exceeds "
                         f"`total_num_frames={total}`.")
    if n <= 0:
        raise ValueError(f"Video can't be sampled: {n} frames from {total}")
    step = total / n
    positions = np.arange(math.ceil(total / step), dtype=np.float64) * step
    return positions.astype(np.float32).astype(np.int64)


def qwen3(total: int, *, num_frames: int | None, fps: float | None, video_fps: float | None,
          min_frames: int, max_frames: int) -> np.ndarray:
    """Qwen3-VL's ``sample_frames``: evenly spaced over [0, total - 1], rounded half to even.

    A missing frame rate is taken as 24, as there."""
    if fps is not None and num_frames is not None:
        raise ValueError("`num_frames` and `fps` are mutually exclusive arguments, please use "
                         "only one!")
    if num_frames is None and fps is not None:
        rate = 24.0 if video_fps is None else video_fps
        num_frames = int(total / rate * fps)
        num_frames = min(max(num_frames, min_frames), max_frames, total)
    if num_frames is None:
        num_frames = min(max(total, min_frames), max_frames)
    if num_frames < 0:
        raise ValueError(f"cannot sample {num_frames} frames")
    return np.linspace(0, total - 1, num_frames).round().astype(np.int64)


__all__ = ["qwen2", "qwen3", "uniform"]
