"""The Preprocess call's messages as Python values: requests built, responses read.

``build_request`` makes a PreprocessRequest of images and videos; ``read_response`` turns a
PreprocessResponse into a ``PreprocessResult`` with every tensor materialized (shm segments mapped
and unlinked, rdma handles pulled)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._proto import preprocessor_pb2 as pb
from .compact import CompactTensor
from .transport.tensors import read_tensor


@dataclass
class PreprocessedImage:
    """One served item: an image's pixel_values, or a video's pixel_values_videos."""

    pixel_values: Any  # np.ndarray, or a torch tensor with as_torch (a CompactTensor: compact)
    grid_thw: tuple[int, int, int]
    num_tokens: int
    content_hash: bytes
    cache_hit: bool
    transport: str
    worker: str = ""  # the server that made it (routing.RoutedClient); "" for Client
    # A video's metadata (frames_indices, fps, total_num_frames, duration, width, height) as
    # transformers' video processor returns it, and its prompt timestamps; None for an image.
    video: dict[str, Any] | None = None


@dataclass
class PreprocessResult:
    request_id: str
    items: list[PreprocessedImage]
    timings: dict[str, int] = field(default_factory=dict)  # server-side microseconds
    latency_s: float = 0.0  # client-side, send to materialized arrays

    @property
    def images(self) -> list[PreprocessedImage]:
        """The image items, in order."""
        return [i for i in self.items if i.video is None]

    @property
    def videos(self) -> list[PreprocessedImage]:
        """The video items, in order."""
        return [i for i in self.items if i.video is not None]

    @property
    def pixel_values(self) -> Any:
        """All images' patches concatenated (a copy when there are several images).

        ValueError for items of different shapes beyond the first axis (whole images, as Pixtral's
        are served unpadded): take each item's pixel_values."""
        return _joined([i.pixel_values for i in self.images])

    @property
    def pixel_values_videos(self) -> Any:
        """All videos' patches concatenated, as transformers' video processor returns them."""
        return _joined([i.pixel_values for i in self.videos])

    @property
    def video_grid_thw(self) -> np.ndarray:
        return np.array([i.grid_thw for i in self.videos], dtype=np.int64).reshape(-1, 3)

    @property
    def video_metadata(self) -> list[dict[str, Any]]:
        return [dict(i.video) for i in self.videos if i.video is not None]

    @property
    def image_grid_thw(self) -> np.ndarray:
        return np.array([i.grid_thw for i in self.images], dtype=np.int64).reshape(-1, 3)

    @property
    def num_tokens(self) -> np.ndarray:
        return np.array([i.num_tokens for i in self.items], dtype=np.int64)


def _joined(parts: list[Any]) -> Any:
    """Items' tensors joined along the first axis (see PreprocessResult.pixel_values)."""
    if not parts:
        raise ValueError("the result holds no such items")
    if len(parts) == 1:
        return parts[0]
    shapes = {tuple(p.shape[1:]) for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"the items' pixel_values differ in shape ({sorted(shapes)}) and "
                         "cannot be joined: read items[i].pixel_values (padding a batch is "
                         "the caller's)")
    if isinstance(parts[0], CompactTensor):  # one request: one table for every item
        first = parts[0]
        return CompactTensor(_cat([p.codes for p in parts]), first.lut, first.dtype, first.run)
    return _cat(parts)


def _cat(parts: list[Any]) -> Any:
    """NumPy arrays or torch tensors concatenated along the first axis."""
    if not isinstance(parts[0], np.ndarray):
        import torch

        return torch.cat(parts)
    return np.concatenate(parts)


def _media_item(image: Any, video: Any = None) -> Any:
    """The MediaItem of an image (or, with ``video`` VideoOptions, a video)."""
    if isinstance(image, pb.MediaItem):
        return image
    if isinstance(image, (bytes, bytearray, memoryview)):
        item = pb.MediaItem(data=bytes(image))
    elif isinstance(image, str) and image[:5].lower() in ("data:", "file:"):
        item = pb.MediaItem(url=image)
    elif isinstance(image, (str, os.PathLike)):
        with open(image, "rb") as fh:
            item = pb.MediaItem(data=fh.read())
    else:
        kind = "images" if video is None else "videos"
        raise TypeError(f"{kind} must be bytes, a path or a data:/file:// URL string, got "
                        f"{type(image).__name__}")
    if video is not None:
        item.video.CopyFrom(video)
    return item


VIDEO_OPTIONS = ("do_sample_frames", "fps", "num_frames", "min_frames", "max_frames",
                 "min_pixels", "max_pixels", "decoder")


def video_options(videos_kwargs: dict[str, Any] | None) -> Any:
    """The VideoOptions message of a ``videos_kwargs`` dict (None values are left unset)."""
    opts = dict(videos_kwargs or {})
    unknown = set(opts) - set(VIDEO_OPTIONS)
    if unknown:
        raise ValueError(f"unknown videos_kwargs {sorted(unknown)}: use {list(VIDEO_OPTIONS)}")
    return pb.VideoOptions(**{k: v for k, v in opts.items() if v is not None})


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def build_request(images: Any = None, *, model: str | None = None, dtype: str = "float32",
                  transport: str = "auto", min_pixels: int | None = None,
                  max_pixels: int | None = None, request_id: str | None = None,
                  namespace: str | None = None, encoding: str = "", videos: Any = None,
                  videos_kwargs: dict[str, Any] | None = None) -> Any:
    """The PreprocessRequest for images, then videos (their options in ``videos_kwargs``).

    ``encoding="uint8+lut"`` asks for the compact format (images only)."""
    opts = video_options(videos_kwargs)
    items = ([_media_item(i) for i in _as_list(images)]
             + [_media_item(v, opts) for v in _as_list(videos)])
    req = pb.PreprocessRequest(
        request_id=request_id or uuid.uuid4().hex, model=model or "", dtype=dtype,
        transport=transport, shm_namespace=namespace if namespace is not None else "",
        items=items, encoding=encoding)
    for name, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
        if value is not None:
            setattr(req, name, _pixel_count(name, value))
    return req


def _pixel_count(name: str, value: Any) -> int:
    """An integer pixel budget (a NumPy integer too); TypeError for a bool, a float or a str.

    Never truncated: 1000000.7 would ask for a budget nobody gave."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def read_response(resp: Any, *, as_torch: bool = False, unlink: bool = True,
                  puller: Any = None, expand: bool = False) -> PreprocessResult:
    """Reads a response into a result, every item materialized.

    Maps and unlinks shm segments, and pulls rdma handles with ``puller`` (default
    :func:`smg_fast.transport.rdma.default_puller`). Compact ("uint8+lut") items come back as
    CompactTensor, or with ``expand`` as the tensors they encode."""
    items = []
    for it in resp.items:
        items.append(PreprocessedImage(
            pixel_values=read_tensor(it.pixel_values, as_torch=as_torch, unlink=unlink,
                                     puller=puller, expand=expand),
            grid_thw=tuple(int(v) for v in it.grid_thw), num_tokens=int(it.num_tokens),
            content_hash=bytes(it.content_hash), cache_hit=bool(it.cache_hit),
            transport=it.transport or it.pixel_values.WhichOneof("payload") or "",
            video=_video_metadata(it.video) if it.HasField("video") else None))
    t = resp.timings
    timings = {k: int(getattr(t, k)) for k in ("queue_us", "decode_us", "preprocess_us",
                                               "transport_us", "total_us")}
    return PreprocessResult(resp.request_id, items, timings)


def _video_metadata(msg: Any) -> dict[str, Any]:
    """A VideoInfo message as transformers' video_metadata fields (fps None when unknown).

    Plus ``timestamps``: the seconds Qwen3-VL's prompt shows before each temporal group, and
    ``decoder``: whose frames (None from a server that does not say)."""
    return {"frames_indices": [int(i) for i in msg.frames_indices], "fps": msg.fps or None,
            "total_num_frames": int(msg.total_num_frames), "duration": float(msg.duration),
            "width": int(msg.width), "height": int(msg.height),
            "timestamps": [float(t) for t in msg.timestamps], "decoder": msg.decoder or None}


__all__ = ["VIDEO_OPTIONS", "PreprocessResult", "PreprocessedImage", "build_request",
           "read_response", "video_options"]
