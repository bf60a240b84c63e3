"""A call's ``videos`` argument as a list of videos: encoded ones, or decoded frames.

One video is encoded bytes, a local file path, a 4-D array (frames, H, W, 3) or (frames, 3, H,
W) of uint8, or a list of frames (PIL RGB images or (H, W, 3) uint8 arrays); a list of such
videos is a batch. Frames are read as transformers' ``make_batched_videos`` reads them; inputs
whose transformers reading differs from a plain uint8 RGB video raise UnsupportedCallError."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidVideoError, UnsupportedCallError


@dataclass
class FrameVideo:
    """Decoded frames, (T, H, W, 3) uint8, and the caller's metadata for them (or None)."""

    frames: np.ndarray
    metadata: dict[str, Any] | None = None


EncodedVideo = bytes | bytearray | memoryview | str | os.PathLike
VideoItem = FrameVideo | EncodedVideo


def _is_frame(x: Any) -> bool:
    from PIL import Image

    return isinstance(x, Image.Image) or (isinstance(x, np.ndarray) and x.ndim == 3)


def _frames_of(index: int, video: Any) -> np.ndarray:
    """(T, H, W, 3) uint8 of a 4-D array or a list of frames."""
    from PIL import Image

    if isinstance(video, (list, tuple)):
        arrays = []
        for f in video:
            if isinstance(f, Image.Image):
                if f.mode != "RGB":
                    raise UnsupportedCallError(f"video {index}: PIL frames must be RGB, got "
                                               f"{f.mode}")
                f = np.asarray(f)
            arrays.append(f)
        if len({a.shape for a in arrays}) != 1:
            raise InvalidVideoError(index, "frames of different sizes")
        video = np.stack(arrays)
    if hasattr(video, "numpy") and not isinstance(video, np.ndarray):  # a CPU torch tensor
        video = video.numpy()
    arr = np.asarray(video)
    if arr.ndim == 3:  # one frame: a video of one frame, as transformers batches it
        arr = arr[None]
    if arr.ndim != 4:
        raise InvalidVideoError(index, f"expected 4-D frames, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        raise UnsupportedCallError(f"video {index}: frames must be uint8, got {arr.dtype}")
    if arr.shape[1] in (1, 3):  # transformers infers channels first wherever they may be
        if arr.shape[1] == 1:
            raise UnsupportedCallError(f"video {index}: frames of shape {arr.shape} read "
                                       "channels first (one channel), as transformers reads them")
        arr = arr.transpose(0, 2, 3, 1)
    if arr.shape[-1] != 3:
        raise UnsupportedCallError(f"video {index}: frames must have 3 channels, got shape "
                                   f"{arr.shape}")
    if 0 in arr.shape:
        raise InvalidVideoError(index, f"empty frames, shape {arr.shape}")
    return arr


def _metadata_list(metadata: Any, count: int) -> list[dict[str, Any] | None]:
    """One metadata dict (or None) per video, as transformers pairs them."""
    if metadata is None:
        return [None] * count
    items = metadata if isinstance(metadata, (list, tuple)) else [metadata]
    if items and isinstance(items[0], (list, tuple)):
        items = [m for sub in items for m in sub]
    out = [dict(m.items()) if m is not None else None for m in items]
    if len(out) != count:
        raise ValueError(f"received {count} videos but {len(out)} video_metadata entries; "
                         "pass one entry per video")
    return out


def _flatten(videos: list[Any] | tuple[Any, ...]) -> list[Any]:
    """A batch's videos; nested lists of videos flattened in order, as transformers does.

    A list whose first element is a frame (a PIL image, a 3-D array or tensor) is one video."""
    out: list[Any] = []
    for video in videos:
        if isinstance(video, (list, tuple)) and video and not _is_frame(video[0]) \
                and getattr(video[0], "ndim", None) != 3:
            out.extend(_flatten(video))
        else:
            out.append(video)
    return out


def video_items(videos: Any, metadata: Any = None) -> list[VideoItem]:
    """The videos of a call, in order; metadata paired with frame videos."""
    if isinstance(videos, (bytes, bytearray, memoryview, str, os.PathLike)):
        raw: list[Any] = [videos]
    elif isinstance(videos, np.ndarray) or hasattr(videos, "numpy"):
        arr = np.asarray(videos.numpy() if hasattr(videos, "numpy") else videos)
        raw = list(arr) if arr.ndim == 5 else [arr]
    elif isinstance(videos, (list, tuple)):
        if not videos:
            raise ValueError("no videos given")
        raw = [videos] if _is_frame(videos[0]) else _flatten(videos)
    else:
        raise TypeError(f"videos: expected bytes, a path, frames or a list of videos, got "
                        f"{type(videos).__name__}")
    metas = _metadata_list(metadata, len(raw))
    items: list[VideoItem] = []
    for i, (video, meta) in enumerate(zip(raw, metas, strict=True)):
        if isinstance(video, (bytes, bytearray, memoryview, str, os.PathLike)):
            items.append(video)
        else:
            items.append(FrameVideo(_frames_of(i, video), meta))
    return items


__all__ = ["EncodedVideo", "FrameVideo", "VideoItem", "video_items"]
