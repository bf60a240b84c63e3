"""The processor config: every field that changes an output, and its fingerprint.

Also the checks every family shares. The families themselves (built-in values, folder reading)
register in processors/families/."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from ..imaging.media import DEFAULT_IMAGE_FORMATS, normalize_formats

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)
# Which reference a processor reproduces: transformers' PIL backend (Qwen), Kimi's upstream
# NumPy/PIL code, or transformers' torchvision backend (both; what vLLM and SGLang run).
BACKENDS = ("pil", "upstream", "torchvision")

def default_max_image_pixels() -> int | None:
    """Pillow's decompression-bomb limit at the time the processor is built."""
    limit = Image.MAX_IMAGE_PIXELS
    return int(limit) if limit else None


@dataclass(frozen=True)
class ProcessorConfig:
    """Everything that changes a processor's output. ``fingerprint`` identifies it."""

    family: str
    patch_size: int
    merge_size: int
    temporal_patch_size: int = 1
    image_mean: tuple[float, float, float] = HALF
    image_std: tuple[float, float, float] = HALF
    rescale_factor: float = 1 / 255
    resample: int = 3  # PIL.Image.Resampling.BICUBIC
    backend: str = "pil"  # one of BACKENDS (each family allows its own; see processors)
    # Qwen (smart_resize)
    min_pixels: int | None = None
    max_pixels: int | None = None
    # Kimi-K2.5 (navit resize)
    in_patch_limit: int | None = None
    patch_limit_on_one_side: int | None = None
    # Gemma 4 (soft-token budget: max_soft_tokens * merge_size^2 patches)
    max_soft_tokens: int | None = None
    # False: rescale only (transformers' do_normalize=False; image_mean / image_std kept, unused)
    do_normalize: bool = True
    # InternVL (closest-ratio tile grid of patch_size tiles, then a thumbnail)
    crop_to_patches: bool | None = None
    min_patches: int | None = None
    max_patches: int | None = None
    # Pixtral (the longest side's limit; each side then rounded up to a patch multiple)
    longest_edge: int | None = None
    # LLaVA-NeXT / OneVision (the (height, width) canvases tiles are cut from)
    image_grid_pinpoints: tuple[tuple[int, int], ...] | None = None
    # Input limits and resampling rule (not part of the model's config)
    max_image_pixels: int | None = field(default_factory=default_max_image_pixels)
    pass_order: str | None = None  # None: the installed Pillow's rule
    # Pillow formats encoded inputs may be in (an allowlist: see media.DEFAULT_IMAGE_FORMATS)
    image_formats: tuple[str, ...] = DEFAULT_IMAGE_FORMATS

    @property
    def fingerprint(self) -> str:
        fields = dataclasses.asdict(self)
        fields.pop("max_image_pixels")  # limits reject inputs; they never change an output
        fields.pop("image_formats")
        for name in _FAMILY_ONLY:
            if fields[name] is None:
                del fields[name]  # unset: a family's fingerprint holds only fields it uses
        if fields["do_normalize"]:
            del fields["do_normalize"]  # the default stays out of the fingerprint
        if fields["backend"] == "torchvision":
            fields["pass_order"] = None  # torch's resize has one pass order
        elif fields["pass_order"] is None:
            from ..resample import pillow_pass_order

            fields["pass_order"] = pillow_pass_order()
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# fields only some families set (None elsewhere), left out of the fingerprint while unset
_FAMILY_ONLY = ("max_soft_tokens", "crop_to_patches", "min_patches", "max_patches",
                "longest_edge", "image_grid_pinpoints")


def whole_field(key: str, value: Any) -> int:
    """An integer field's value: an int, or a float with no fraction (JSON's 1e6).

    ValueError for a fraction, a str or a bool, which int() would turn into some other number
    than the one transformers' class computes with (1000000.7 is not 1000000)."""
    if not isinstance(value, bool) and isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{key} must be an integer, got {type(value).__name__} {value!r}")


def resample_field(value: Any) -> int:
    """resample as an int; ValueError for any other type (a float, a str, a NumPy integer).

    transformers' PIL classes resize with anything but an int (a resampling enum is one) as
    BILINEAR, whatever its value: resample=3.0 is not BICUBIC there."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"resample must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def coerce_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Config fields as read from JSON or given by a caller, in the dataclass's types."""
    fields = dict(fields)
    for key in ("image_mean", "image_std"):
        if key in fields:
            v = fields[key]
            v = [v] * 3 if isinstance(v, (int, float)) else list(v)
            if len(v) != 3:
                raise ValueError(f"{key} must have 3 values, got {v!r}")
            fields[key] = tuple(float(x) for x in v)
    for key in ("patch_size", "merge_size", "temporal_patch_size", "min_pixels", "max_pixels",
                "in_patch_limit", "patch_limit_on_one_side", "max_soft_tokens",
                "longest_edge"):
        if key in fields and fields[key] is not None:
            fields[key] = whole_field(key, fields[key])
    if fields.get("resample") is not None:
        fields["resample"] = resample_field(fields["resample"])
    if "image_formats" in fields:
        fields["image_formats"] = normalize_formats(fields["image_formats"])
    return fields


def validate_common(cfg: ProcessorConfig) -> None:
    """The checks every family's config must pass (each family adds its own)."""
    whole_image = cfg.merge_size == 1 and cfg.temporal_patch_size == 1  # patch: a whole image
    if not 1 <= cfg.patch_size <= (4096 if whole_image else 64):
        raise ValueError(f"patch_size must be 1..64 (1..4096 with merge_size and "
                         f"temporal_patch_size 1), got {cfg.patch_size}")
    if not 1 <= cfg.merge_size <= 16 or not 1 <= cfg.temporal_patch_size <= 16:
        raise ValueError("merge_size and temporal_patch_size must be 1..16")
    if cfg.resample not in range(6):
        raise ValueError(f"resample must be a PIL.Image.Resampling value, got {cfg.resample}")
    if any(s == 0 for s in cfg.image_std):
        raise ValueError("image_std must be non-zero")
    if cfg.max_image_pixels is not None and cfg.max_image_pixels < 1:
        raise ValueError("max_image_pixels must be positive or None")
    if not cfg.image_formats or not isinstance(cfg.image_formats, tuple):
        raise ValueError("image_formats must be a non-empty tuple of Pillow format names")
    if cfg.pass_order not in (None, "horizontal_first", "pillow13"):
        raise ValueError("pass_order must be None, 'horizontal_first' or 'pillow13'")
    if cfg.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {cfg.backend!r}")
    if cfg.backend == "torchvision" and cfg.resample not in (1, 2, 3):
        raise ValueError("the torchvision backend implements resample=3 (BICUBIC), 2 "
                         f"(BILINEAR) and 1 (LANCZOS) only, got resample={cfg.resample}")
    if not isinstance(cfg.do_normalize, bool):
        raise ValueError(f"do_normalize must be a bool, got {cfg.do_normalize!r}")
