"""Drop-ins for transformers' Qwen video processors, computed by smg-fast.

    from smg_fast.hf_video import Qwen2VLVideoProcessor, Qwen3VLVideoProcessor

Each class is a subclass of transformers' class of the same name (which needs torchvision, as
there), so it is built, loaded with ``from_pretrained``, saved and called as that class is. A
call on frames (numpy arrays, torch CPU tensors, lists of PIL frames) or encoded bytes, with
options smg-fast reproduces, is computed by smg-fast's ``VideoProcessor``, bit for bit the
class's output; so are local file paths where transformers decodes them with torchcodec (its
``fetch_videos``, when torchcodec loads here), with smg-fast's ``decoder="torchcodec"``. Anything
else (URLs, path objects, paths where torchcodec does not load, display rotations that are not
quarter turns, ``device=...``, other options) is computed by transformers' own class, the
reason logged once. ``register()`` makes transformers' ``AutoVideoProcessor`` return them (what
the engine plug-ins call). The classes are made on first access, so importing this module needs
neither torch nor torchvision."""

from __future__ import annotations

import importlib.util
import os
import threading
import weakref
from typing import Any

from .errors import UnsupportedCallError, UnsupportedVideoError
from .hf_compat import log_once
from .processors.video import VideoProcessor
from .processors.video_config import read_video_fields
from .processors.video_loader import video_processor_for

# Call options smg-fast's video processor takes (return_tensors and return_metadata handled here).
_OURS = frozenset({"fps", "num_frames", "do_sample_frames", "video_metadata", "return_metadata",
                   "cap_pixels_per_frame", "size", "min_pixels", "max_pixels", "min_frames",
                   "max_frames", "return_tensors", "do_rescale", "do_normalize", "device"})
_BASES = {"Qwen2VLVideoProcessor": ("transformers.models.qwen2_vl.video_processing_qwen2_vl",
                                    "qwen2_vl"),
          "Qwen3VLVideoProcessor": ("transformers.models.qwen3_vl.video_processing_qwen3_vl",
                                    "qwen3_vl")}
# The model types whose transformers video processor each class is.
MODEL_TYPES = {"Qwen2VLVideoProcessor": ("qwen2_vl", "qwen2_5_vl"),
               "Qwen3VLVideoProcessor": ("qwen3_vl", "qwen3_vl_moe")}
_classes: dict[str, type] = {}
_lock = threading.Lock()
# id(instance) -> (its settings, smg-fast's processor for them), dropped with the instance
_processors: dict[int, tuple[str, VideoProcessor]] = {}
_cache_lock = threading.Lock()


def _first(videos: Any) -> Any:
    """The first frame or video of a call's videos (a list of lists of frames is unwrapped)."""
    first = videos[0] if isinstance(videos, (list, tuple)) and videos else videos
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    return first


def _is_path(x: Any) -> bool:
    return isinstance(x, str) or hasattr(x, "__fspath__")


def _local_paths(videos: Any) -> bool:
    """True for a local video file's path or a flat list of them, as transformers reads them.

    Only str paths of existing files: transformers' loader refuses path objects (ValueError)
    and paths that are no file (TypeError); URLs and frame-path lists it fetches itself."""
    items = list(videos) if isinstance(videos, (list, tuple)) else [videos]
    return bool(items) and all(isinstance(v, str) and "://" not in v and os.path.isfile(v)
                               for v in items)


def _torchcodec_usable() -> bool:
    """Whether transformers decodes video paths with torchcodec in this environment."""
    from transformers.utils import import_utils

    usable = getattr(import_utils, "is_torchcodec_usable", None)
    if usable is not None:
        return bool(usable(decode="video"))
    return bool(import_utils.is_torchcodec_available())


def _why_not(videos: Any, kwargs: dict[str, Any]) -> str | None:
    """Why smg-fast does not compute this call (None: it does; frames or bytes, known options)."""
    unknown = set(kwargs) - _OURS
    if unknown:
        return f"options {sorted(unknown)}"
    device = kwargs.get("device")
    if device is not None and str(device) != "cpu":
        return f"device={str(device)!r} (smg-fast computes on the CPU)"
    first = _first(videos)
    if _is_path(first):
        if not _local_paths(videos):
            return ("videos given as URLs, path objects, paths of no file or lists of frame "
                    "paths (transformers fetches or refuses them)")
        if not _torchcodec_usable():
            return "video paths where torchcodec does not load (transformers falls back)"
        if importlib.util.find_spec("av") is None:
            return "video paths without PyAV here (smg-fast decodes with it)"
    flags = (kwargs.get("do_rescale"), kwargs.get("do_normalize"))
    if flags == (False, False):
        dtype = getattr(first, "dtype", None)
        if dtype is not None and str(dtype).removeprefix("torch.") != "uint8":
            return "do_rescale=False, do_normalize=False with non-uint8 frames"
    elif False in flags:
        return "only one of do_rescale, do_normalize is False"
    return None


def _make(name: str) -> type:
    import importlib

    from transformers.feature_extraction_utils import BatchFeature
    from transformers.video_utils import VideoMetadata

    module, family = _BASES[name]
    base = getattr(importlib.import_module(module), name)
    meta_fields = set(VideoMetadata.__dataclass_fields__)

    def _smg_processor(self: Any) -> VideoProcessor:
        """smg-fast's processor for this instance's current attributes (rebuilt if they change).

        Kept outside the instance, whose __dict__ transformers deep-copies (to_dict, copies)."""
        fields = read_video_fields(self.to_dict())
        key = repr(sorted(fields.items()))
        with _cache_lock:
            cached = _processors.get(id(self))
        if cached is not None and cached[0] == key:
            return cached[1]
        proc = video_processor_for(family, fields)
        with _cache_lock:
            if id(self) not in _processors:
                weakref.finalize(self, _processors.pop, id(self), None)
            _processors[id(self)] = (key, proc)
        return proc

    def preprocess(self: Any, videos: Any, **kwargs: Any) -> Any:
        """transformers' preprocess; computed by smg-fast where it reproduces the call."""
        why = _why_not(videos, kwargs)
        if why is not None:
            return _hand_over(self, why, videos, kwargs)
        try:
            proc = _smg_processor(self)
        except ValueError as exc:  # an attribute smg-fast does not reproduce (resample, ...)
            return _hand_over(self, f"its settings: {exc}", videos, kwargs)
        options = dict(kwargs)
        return_tensors = options.pop("return_tensors", None)
        return_metadata = options.pop("return_metadata", self.return_metadata)
        options.pop("device", None)  # None or the CPU
        # transformers returns the resized uint8 patches when neither is done (vLLM's default)
        raw = (options.pop("do_rescale", None), options.pop("do_normalize", None)) == (False,
                                                                                       False)
        if _local_paths(videos):  # transformers' fetch_videos decodes them with torchcodec
            options["decoder"] = "torchcodec"
        try:
            out = proc(videos, return_tensors="pt", return_metadata=True,
                       dtype="uint8" if raw else "float32", **options)
        except (UnsupportedCallError, UnsupportedVideoError) as exc:
            return _hand_over(self, str(exc), videos, kwargs)
        data = {"pixel_values_videos": out["pixel_values_videos"],
                "video_grid_thw": out["video_grid_thw"]}
        if return_metadata:
            data["video_metadata"] = [
                VideoMetadata(**{k: v for k, v in m.items() if k in meta_fields})
                for m in out["video_metadata"]]
        return BatchFeature(data=data, tensor_type=return_tensors)

    def _hand_over(self: Any, why: str, videos: Any, kwargs: dict[str, Any]) -> Any:
        """The call computed by transformers' own class; the reason logged once per process."""
        log_once(f"smg-fast: {name} hands calls to transformers' {name} when: {why}")
        return base.preprocess(self, videos, **kwargs)

    doc = (f"transformers' {name}, computed by smg-fast where it reproduces the call bit for "
           "bit (frames, encoded bytes, local paths decoded as torchcodec decodes them; URLs go "
           "to transformers' own decoding).")
    return type(name, (base,), {"preprocess": preprocess, "__doc__": doc,
                                "__module__": __name__})


def register() -> list[str]:
    """Makes transformers' AutoVideoProcessor (and so AutoProcessor) return these classes.

    For the model types whose video processor is one of them (transformers resolves a folder's
    class by its name, so every folder naming it gets the drop-in). Needs torchvision, as the
    classes do. Idempotent; returns the model types registered."""
    from transformers import AutoVideoProcessor
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    done: list[str] = []
    for name, model_types in MODEL_TYPES.items():
        cls = __getattr__(name)
        for model_type in model_types:
            if model_type in CONFIG_MAPPING:
                AutoVideoProcessor.register(CONFIG_MAPPING[model_type], video_processor_class=cls,
                                            exist_ok=True)
                done.append(model_type)
    return done


def __getattr__(name: str) -> type:
    """The drop-in class named name, made on first access (imports transformers' class)."""
    if name not in _BASES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if name not in _classes:
            _classes[name] = _make(name)
        return _classes[name]


__all__ = ["Qwen2VLVideoProcessor", "Qwen3VLVideoProcessor", "register"]  # noqa: F822  (made on access)
