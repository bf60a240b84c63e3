"""Drop-ins for transformers' Qwen video processors, computed by smg-fast.

    from smg_fast.hf_video import Qwen2VLVideoProcessor, Qwen3VLVideoProcessor

Each class is a subclass of transformers' class of the same name (which needs torchvision, as
there), so it is built, loaded with ``from_pretrained``, saved and called as that class is. A
call on frames (numpy arrays, torch CPU tensors, lists of PIL frames) or encoded bytes, with
options smg-fast reproduces, is computed by smg-fast's ``VideoProcessor``, bit for bit the
class's output; anything else (paths and URLs, which transformers decodes with torchcodec,
``device=...``, other options) is computed by transformers' own class. The classes are made on
first access, so importing this module needs neither torch nor torchvision."""

from __future__ import annotations

import threading
from typing import Any

from .errors import UnsupportedCallError
from .processors.video import VideoProcessor
from .processors.video_config import read_video_fields
from .processors.video_loader import video_processor_for

# Call options smg-fast's video processor takes (return_tensors and return_metadata handled here).
_OURS = frozenset({"fps", "num_frames", "do_sample_frames", "video_metadata", "return_metadata",
                   "cap_pixels_per_frame", "size", "min_pixels", "max_pixels", "min_frames",
                   "max_frames", "return_tensors"})
_BASES = {"Qwen2VLVideoProcessor": ("transformers.models.qwen2_vl.video_processing_qwen2_vl",
                                    "qwen2_vl"),
          "Qwen3VLVideoProcessor": ("transformers.models.qwen3_vl.video_processing_qwen3_vl",
                                    "qwen3_vl")}
_classes: dict[str, type] = {}
_lock = threading.Lock()


def _computable(videos: Any, kwargs: dict[str, Any]) -> bool:
    """Whether smg-fast computes this call (frames or bytes in, options it reproduces)."""
    if set(kwargs) - _OURS:
        return False
    first = videos[0] if isinstance(videos, (list, tuple)) and videos else videos
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    return not isinstance(first, str) and not hasattr(first, "__fspath__")


def _make(name: str) -> type:
    import importlib

    from transformers.feature_extraction_utils import BatchFeature
    from transformers.video_utils import VideoMetadata

    module, family = _BASES[name]
    base = getattr(importlib.import_module(module), name)
    meta_fields = set(VideoMetadata.__dataclass_fields__)

    def _smg_processor(self: Any) -> VideoProcessor:
        """smg-fast's processor for this instance's current attributes (rebuilt if they change)."""
        fields = read_video_fields(self.to_dict())
        key = repr(sorted(fields.items()))
        cached = self.__dict__.get("_smg_video")
        if cached is None or cached[0] != key:
            cached = (key, video_processor_for(family, fields))
            self.__dict__["_smg_video"] = cached
        return cached[1]

    def preprocess(self: Any, videos: Any, **kwargs: Any) -> Any:
        """transformers' preprocess; computed by smg-fast where it reproduces the call."""
        if not _computable(videos, kwargs):
            return base.preprocess(self, videos, **kwargs)
        try:
            proc = _smg_processor(self)
        except ValueError:  # an attribute smg-fast does not reproduce (resample, do_resize...)
            return base.preprocess(self, videos, **kwargs)
        options = dict(kwargs)
        return_tensors = options.pop("return_tensors", None)
        return_metadata = options.pop("return_metadata", self.return_metadata)
        try:
            out = proc(videos, return_tensors="pt", return_metadata=True, **options)
        except UnsupportedCallError:
            return base.preprocess(self, videos, **kwargs)
        data = {"pixel_values_videos": out["pixel_values_videos"],
                "video_grid_thw": out["video_grid_thw"]}
        if return_metadata:
            data["video_metadata"] = [
                VideoMetadata(**{k: v for k, v in m.items() if k in meta_fields})
                for m in out["video_metadata"]]
        return BatchFeature(data=data, tensor_type=return_tensors)

    doc = (f"transformers' {name}, computed by smg-fast where it reproduces the call bit for "
           "bit (frames or encoded bytes; paths and URLs go to transformers' own decoding).")
    return type(name, (base,), {"preprocess": preprocess, "__doc__": doc,
                                "__module__": __name__})


def __getattr__(name: str) -> type:
    """The drop-in class named name, made on first access (imports transformers' class)."""
    if name not in _BASES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if name not in _classes:
            _classes[name] = _make(name)
        return _classes[name]


__all__ = ["Qwen2VLVideoProcessor", "Qwen3VLVideoProcessor"]  # noqa: F822  (made on access)
