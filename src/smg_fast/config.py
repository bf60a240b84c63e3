"""Processor configs: the built-in families, HuggingFace model folders, and fingerprints."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from .media import DEFAULT_IMAGE_FORMATS, normalize_formats

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)

QWEN_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
FAMILIES = (*QWEN_FAMILIES, "kimi_k25")


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
    # Qwen (smart_resize)
    min_pixels: int | None = None
    max_pixels: int | None = None
    # Kimi-K2.5 (navit resize)
    in_patch_limit: int | None = None
    patch_limit_on_one_side: int | None = None
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
        if fields["pass_order"] is None:
            from .resample import pillow_pass_order

            fields["pass_order"] = pillow_pass_order()
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def is_qwen(self) -> bool:
        return self.family in QWEN_FAMILIES


BUILTIN: dict[str, ProcessorConfig] = {
    # Published Qwen2-VL-7B-Instruct / Qwen2.5-VL-7B-Instruct preprocessor configs.
    "qwen2_vl": ProcessorConfig("qwen2_vl", 14, 2, 2, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                                min_pixels=3136, max_pixels=12845056),
    "qwen2_5_vl": ProcessorConfig("qwen2_5_vl", 14, 2, 2, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                                  min_pixels=3136, max_pixels=12845056),
    # Qwen3-VL-8B-Instruct: size 65536..16777216, patch 16, mean/std 0.5.
    "qwen3_vl": ProcessorConfig("qwen3_vl", 16, 2, 2, HALF, HALF,
                                min_pixels=65536, max_pixels=16777216),
    # Kimi-K2.5 media_proc_cfg.
    "kimi_k25": ProcessorConfig("kimi_k25", 14, 2, 1, HALF, HALF, in_patch_limit=16384,
                                patch_limit_on_one_side=512),
}

# transformers' Qwen2VLImageProcessorPil class attributes (used for keys a folder lacks).
HF_QWEN_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 56 * 56,
    "max_pixels": 28 * 28 * 1280, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}

# model_type values of config.json -> family
MODEL_TYPES = {
    "qwen2_vl": "qwen2_vl",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe": "qwen3_vl",
    "kimi_k25": "kimi_k25",
}

QWEN_OVERRIDES = {"min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size",
                  "image_mean", "image_std", "rescale_factor", "resample", "max_image_pixels",
                  "pass_order", "image_formats"}
KIMI_OVERRIDES = {"in_patch_limit", "patch_limit_on_one_side", "patch_size", "merge_size",
                  "merge_kernel_size", "image_mean", "image_std", "resample", "max_image_pixels",
                  "pass_order", "image_formats"}


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def _family_of_folder(folder: str, pre: dict[str, Any]) -> str:
    cfg_path = os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        model_type = _read_json(cfg_path).get("model_type")
        if model_type in MODEL_TYPES:
            return MODEL_TYPES[model_type]
        if model_type is not None and "media_proc_cfg" not in pre:
            raise ValueError(f"{cfg_path}: unsupported model_type {model_type!r}; "
                             f"supported: {sorted(MODEL_TYPES)}")
    if "media_proc_cfg" in pre:
        return "kimi_k25"
    if "Qwen2VLImageProcessor" in str(pre.get("image_processor_type", "")):
        return "qwen3_vl" if int(pre.get("patch_size", 14)) == 16 else "qwen2_vl"
    raise ValueError(f"{folder}: cannot tell the model family (no config.json model_type, "
                     "no media_proc_cfg, no Qwen2VLImageProcessor type)")


def _qwen_fields(pre: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    size = pre.get("size") or {}
    if isinstance(size, dict):
        lo = size.get("shortest_edge", size.get("min_pixels"))
        hi = size.get("longest_edge", size.get("max_pixels"))
        if lo is not None:
            out["min_pixels"] = lo
        if hi is not None:
            out["max_pixels"] = hi
    for key in ("min_pixels", "max_pixels", "patch_size", "temporal_patch_size", "merge_size",
                "image_mean", "image_std", "rescale_factor", "resample"):
        if pre.get(key) is not None:
            out[key] = pre[key]
    if pre.get("do_resize") is False:
        raise ValueError("do_resize=False is not supported")
    if pre.get("do_rescale") is False:
        out["rescale_factor"] = 1.0
    if pre.get("do_normalize") is False:
        out["image_mean"], out["image_std"] = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    return out


def _kimi_fields(pre: dict[str, Any]) -> dict[str, Any]:
    media = pre.get("media_proc_cfg", pre)
    out: dict[str, Any] = {}
    for key in ("in_patch_limit", "patch_limit_on_one_side", "patch_size", "image_mean",
                "image_std", "merge_kernel_size"):
        if media.get(key) is not None:
            out[key] = media[key]
    return out


def build_config(family: str, fields: dict[str, Any]) -> ProcessorConfig:
    """Applies fields (from a folder or overrides) to a built-in family, with validation."""
    base = BUILTIN[family]
    allowed = QWEN_OVERRIDES if base.is_qwen else KIMI_OVERRIDES
    unknown = set(fields) - allowed
    if unknown:
        raise TypeError(f"unknown option(s) for {family}: {sorted(unknown)}; "
                        f"allowed: {sorted(allowed)}")
    fields = dict(fields)
    if "merge_kernel_size" in fields:
        mk = fields.pop("merge_kernel_size")
        fields["merge_size"] = int(mk[0] if isinstance(mk, (list, tuple)) else mk)
    for key in ("image_mean", "image_std"):
        if key in fields:
            v = fields[key]
            v = [v] * 3 if isinstance(v, (int, float)) else list(v)
            if len(v) != 3:
                raise ValueError(f"{key} must have 3 values, got {v!r}")
            fields[key] = tuple(float(x) for x in v)
    for key in ("patch_size", "merge_size", "temporal_patch_size", "min_pixels", "max_pixels",
                "in_patch_limit", "patch_limit_on_one_side", "resample"):
        if key in fields and fields[key] is not None:
            fields[key] = int(fields[key])
    if "image_formats" in fields:
        fields["image_formats"] = normalize_formats(fields["image_formats"])
    cfg = dataclasses.replace(base, **fields)
    _validate(cfg)
    return cfg


def _validate(cfg: ProcessorConfig) -> None:
    if not 1 <= cfg.patch_size <= 64:
        raise ValueError(f"patch_size must be 1..64, got {cfg.patch_size}")
    if not 1 <= cfg.merge_size <= 16 or not 1 <= cfg.temporal_patch_size <= 16:
        raise ValueError("merge_size and temporal_patch_size must be 1..16")
    if cfg.resample not in range(6):
        raise ValueError(f"resample must be a PIL.Image.Resampling value, got {cfg.resample}")
    if any(s == 0 for s in cfg.image_std):
        raise ValueError("image_std must be non-zero")
    if cfg.is_qwen:
        if not cfg.min_pixels or not cfg.max_pixels or cfg.min_pixels > cfg.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")
    elif not cfg.in_patch_limit or not cfg.patch_limit_on_one_side:
        raise ValueError("in_patch_limit and patch_limit_on_one_side must be positive")
    if cfg.max_image_pixels is not None and cfg.max_image_pixels < 1:
        raise ValueError("max_image_pixels must be positive or None")
    if not cfg.image_formats or not isinstance(cfg.image_formats, tuple):
        raise ValueError("image_formats must be a non-empty tuple of Pillow format names")
    if cfg.pass_order not in (None, "horizontal_first", "pillow13"):
        raise ValueError("pass_order must be None, 'horizontal_first' or 'pillow13'")


def resolve_config(
    name_or_dir: str | os.PathLike[str], overrides: dict[str, Any]
) -> ProcessorConfig:
    """A family name or a HuggingFace model folder, then overrides (which win)."""
    key = os.fspath(name_or_dir)
    if key in BUILTIN:
        return build_config(key, overrides)
    if os.path.isdir(key):
        pre_path = os.path.join(key, "preprocessor_config.json")
        if not os.path.isfile(pre_path):
            raise ValueError(f"{key}: no preprocessor_config.json")
        pre = _read_json(pre_path)
        family = _family_of_folder(key, pre)
        if BUILTIN[family].is_qwen:
            # A folder is read the way transformers reads it: keys it lacks take the class
            # defaults of Qwen2VLImageProcessorPil, not our published-config defaults.
            fields = {**HF_QWEN_CLASS_DEFAULTS, **_qwen_fields(pre)}
        else:
            fields = _kimi_fields(pre)
        fields.update(overrides)
        return build_config(family, fields)
    raise ValueError(f"unknown processor {key!r}: use one of {FAMILIES} or a model folder")
