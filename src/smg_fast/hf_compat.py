"""What smg_fast.hf's classes need to stand where transformers' classes stand.

Turning the keyword arguments transformers' loaders and constructors pass into an smg-fast
config, deciding per call whether smg-fast computes the call or transformers' own class does, and
logging each reason for the latter once."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import threading
from typing import Any

import numpy as np

from .processors import Processor, get_family, make_processor
from .processors.call_options import parse_options
from .processors.config import ProcessorConfig
from .processors.hooks import DropIn
from .processors.reference import reference_class
from .processors.registry import config_from_preprocessor, registered

logger = logging.getLogger("smg_fast")

# smg-fast's own options a constructor or from_pretrained may take beyond transformers' ones.
SMG_OPTIONS = frozenset({"max_image_pixels", "pass_order", "image_formats"})
# Passed by transformers' loaders (Auto classes, ProcessorMixin, pipelines) and meaningless to a
# processor built from a dict: accepted and ignored by from_pretrained.
LOADER_NOISE = frozenset({"trust_remote_code", "code_revision", "use_fast", "config",
                          "_commit_hash", "user_agent", "resume_download", "use_auth_token",
                          "local_files_only_override", "adapter_kwargs", "gguf_file"})
# Constructor keys transformers' classes drop rather than keep as attributes.
NOT_KEPT = frozenset({"processor_class", "feature_extractor_type", "image_processor_type"})
# Call options of transformers' ImagesKwargs that no image processor computes with, kept as
# attributes as transformers' classes keep them: processors read them there (PaliGemmaProcessor
# refuses an image processor without image_seq_length).
KEPT_OPTIONS = frozenset({"image_seq_length"})
# The per-call flags transformers keeps on the instance (a folder may set them False).
FLAGS = ("do_rescale", "do_normalize", "do_convert_rgb")
# Call options transformers' class also keeps from its constructor (or an attribute set later) as
# each call's default.
CALL_DEFAULTS = ("input_data_format", "data_format", "device")

_logged: set[str] = set()
_logged_lock = threading.Lock()


def log_once(message: str, level: int = logging.INFO) -> None:
    """Logs message the first time it is seen in this process."""
    with _logged_lock:
        if message in _logged:
            return
        _logged.add(message)
    logger.log(level, message)


def build_processor(dropin: DropIn, kwargs: dict[str, Any], backend: str) -> Processor:
    """The processor for a drop-in class's transformers-style constructor kwargs.

    The kwargs are a preprocessor_config.json's keys, ``min_pixels``, ...; the family is the one
    the drop-in's ``family_of`` picks; keys that change nothing here are ignored, as transformers
    keeps them as plain attributes. A config another drop-in's family alone can read (Kimi's
    media_proc_cfg) is refused."""
    smg = {k: v for k, v in kwargs.items() if k in SMG_OPTIONS}
    pre = {k: _as_dict(v) for k, v in kwargs.items() if k not in SMG_OPTIONS and v is not None}
    for fam in registered():
        if fam.dropin not in (None, dropin) and fam.unambiguous and fam.recognizes(pre):
            raise ValueError(f"this is a {fam.name} config: use "
                             f"{next(iter(fam.dropin.classes))}")
    cfg = config_from_preprocessor(dropin.family_of(pre), dropin.read_kwargs(pre),
                                   {**smg, "backend": backend})
    return make_processor(cfg)


def _as_dict(value: Any) -> Any:
    """transformers' SizeDict (a dataclass) as the dict a preprocessor_config.json holds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    return value


def transformers_class(family: str, backend: str) -> Any:
    """transformers' own class for a family and backend, or None when it cannot run here."""
    cfg = dataclasses.replace(get_family(family).builtin, backend=backend)
    return reference_class(cfg)[0]


def _flatten(images: Any) -> list[Any]:
    """images with nested lists and tuples flattened."""
    if isinstance(images, (list, tuple)):
        return [x for item in images for x in _flatten(item)]
    return [images]


def _is_uint8(image: Any) -> bool:
    """Whether image stays uint8 in transformers' torchvision backend.

    A PIL image, an encoded image or a uint8 array / tensor does."""
    if isinstance(image, (str, bytes)) or hasattr(image, "getbands"):
        return True
    dtype = getattr(image, "dtype", None)
    return dtype is not None and str(dtype) in ("uint8", "torch.uint8")


def _tensor_not_read(image: Any) -> str:
    """Why smg-fast does not read a torch tensor transformers' torchvision class takes, or ""."""
    if not type(image).__module__.startswith("torch"):
        return ""
    device = getattr(image, "device", None)
    if device is not None and device.type != "cpu":
        return f"a tensor on device {device.type!r}"
    if str(getattr(image, "dtype", "")) == "torch.bfloat16":
        return "a bfloat16 tensor"
    return ""


def call_plan(cfg: ProcessorConfig, images: Any, kwargs: dict[str, Any]) -> tuple[str, str]:
    """(output dtype, "") when smg-fast computes this call exactly, else ("", why not).

    A call smg-fast does not compute exactly goes to transformers' own class. The dtype is uint8
    when the torchvision backend (or a PIL class that does the same, ``DropIn.pil_keeps_uint8``)
    skips rescale and normalize (transformers returns the resized bytes)."""
    dropin = get_family(cfg.family).dropin
    default = dropin.dtype(kwargs) if dropin is not None and dropin.dtype else "float32"
    dtype = kwargs.get("dtype", default)
    opts = {k: v for k, v in kwargs.items() if k != "dtype"}
    for im in _flatten(images):
        why = _tensor_not_read(im)
        if why:
            return "", why
    try:
        parse_options(cfg, opts)
    except (TypeError, ValueError) as exc:
        return "", str(exc)
    keeps_uint8 = cfg.backend == "torchvision" or (dropin is not None and dropin.pil_keeps_uint8)
    if keeps_uint8 and opts.get("do_rescale") is False and opts.get("do_normalize") is False:
        if not all(_is_uint8(im) for im in _flatten(images)):
            return "", "do_rescale=False, do_normalize=False with non-uint8 images"
        return "uint8", ""
    return str(dtype), ""


@functools.cache
def alpha_dropped() -> bool:
    """Whether the installed transformers' convert_to_rgb drops a PIL image's alpha.

    Dropping is Pillow's convert("RGB"), as in 5.19, which SGLang 0.5.23 pins; 5.24, what
    smg-fast reproduces, composites it onto white."""
    from PIL import Image
    from transformers.image_transforms import convert_to_rgb

    probe = Image.new("RGBA", (1, 1), (0, 0, 0, 0))
    numpy_out = "return_numpy" in inspect.signature(convert_to_rgb).parameters
    out = convert_to_rgb(probe, return_numpy=True) if numpy_out else convert_to_rgb(probe)
    return int(np.asarray(out).reshape(-1)[0]) == 0


def _has_alpha(image: Any) -> bool:
    return hasattr(image, "getbands") and ("A" in image.getbands() or
                                           image.info.get("transparency") is not None)


def as_installed_transformers(images: Any, do_convert_rgb: bool) -> Any:
    """images, each PIL image with transparency converted as the installed transformers does.

    Only when that transformers' convert_to_rgb drops the alpha; else images as given."""
    if not do_convert_rgb or not alpha_dropped():
        return images
    if isinstance(images, (list, tuple)):
        return [as_installed_transformers(x, do_convert_rgb) for x in images]
    if not _has_alpha(images):
        return images
    rgb = images.convert("RGB")  # a copy, also for RGB: its colour key is ignored there too
    rgb.info.pop("transparency", None)
    return rgb


def call_value(value: Any) -> Any:
    """An attribute's value as a call option: NumPy arrays as lists, NumPy scalars as numbers."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def plain(value: Any) -> Any:
    """JSON-friendly copy of an attribute value (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


__all__ = ["FLAGS", "KEPT_OPTIONS", "LOADER_NOISE", "NOT_KEPT", "SMG_OPTIONS", "alpha_dropped",
           "as_installed_transformers", "build_processor", "call_plan", "call_value", "log_once",
           "logger", "plain", "transformers_class"]
