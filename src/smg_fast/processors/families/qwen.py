"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL: smart_resize and merge-ordered patches.

transformers' smart_resize, BICUBIC, merge-ordered patches with the temporal copy; output
[sum(gh*gw), 3*T*P*P]. Registers the three families, which share one processor, one reading of
transformers' call options, one reference (transformers' Qwen2VLImageProcessorPil /
Qwen2VLImageProcessor) and one drop-in class."""

from __future__ import annotations

import math
from typing import Any

from ...errors import InvalidImageError
from ..config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference
from ..plan import Plan, check_aspect
from ..processor import Processor
from ..registry import Family, register


def smart_resize(height: int, width: int, factor: int, min_pixels: int,
                 max_pixels: int, frames: int = 1,
                 beta_frames: int | None = None) -> tuple[int, int]:
    """(height, width) rounded to multiples of factor with the pixel count in range.

    Same float64 arithmetic and Python round (half to even) as transformers; no re-check after
    the min/max branch, as there. ``frames``: the temporal factor GLM-4.1V counts against the
    budget (frames x height x width); Qwen's rule is frames=1. ``beta_frames``: the frame count
    the rescale factor uses where it differs (Qwen3-VL's video rule compares the rounded count
    and rescales with the sampled one).
    """
    beta_t = frames if beta_frames is None else beta_frames
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if frames * h_bar * w_bar > max_pixels:
        beta = math.sqrt((beta_t * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif frames * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (beta_t * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class QwenVLProcessor(Processor):
    """Qwen's smart_resize and merge-ordered patches with the temporal copy."""

    load_like_transformers = True  # bytes and paths: load_image's EXIF transpose, alpha on white
    per_request_pixels = True  # a request may narrow min_pixels / max_pixels

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height)
        factor = cfg.patch_size * cfg.merge_size
        h, w = smart_resize(height, width, factor, cfg.min_pixels, cfg.max_pixels)
        if h < factor or w < factor:
            raise InvalidImageError(index, f"{width}x{height} resizes to an empty grid ({w}x{h})")
        return Plan(resize_w=w, resize_h=h, grid_h=h // cfg.patch_size, grid_w=w // cfg.patch_size)

    def _layout(self) -> tuple[int, int]:
        return self.config.merge_size, self.config.temporal_patch_size

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows, 3 * self.config.temporal_patch_size * p * p)


# transformers' Qwen2VLImageProcessorPil class attributes: what a model folder's
# preprocessor_config.json lacks takes these (not our published-config defaults), as there.
HF_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 56 * 56,
    "max_pixels": 28 * 28 * 1280, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Qwen preprocessor_config.json (size or min/max_pixels, do_* flags)."""
    out: dict[str, Any] = {}
    size = pre.get("size") or {}
    if not isinstance(size, dict):
        raise ValueError(f"size must be a mapping such as {{'shortest_edge': ..., "
                         f"'longest_edge': ...}}, got {type(size).__name__}")
    if size:
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
    return {**out, **flag_fields(pre)}


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless 0 < min_pixels <= max_pixels."""
    if not (cfg.min_pixels and cfg.max_pixels and 0 < cfg.min_pixels <= cfg.max_pixels):
        raise ValueError("need 0 < min_pixels <= max_pixels")


def _is_qwen_processor(pre: dict[str, Any]) -> bool:
    return "Qwen2VLImageProcessor" in str(pre.get("image_processor_type", ""))


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' size option as min_pixels and max_pixels.

    It is {"shortest_edge": min_pixels, "longest_edge": max_pixels}, or the min_pixels /
    max_pixels keys transformers still reads."""
    lo = size.get("shortest_edge", size.get("min_pixels"))
    hi = size.get("longest_edge", size.get("max_pixels"))
    if set(size) - {"shortest_edge", "longest_edge", "min_pixels", "max_pixels"} or \
            lo is None or hi is None:
        raise ValueError(f"size must contain 'shortest_edge' and 'longest_edge', got {size}")
    return {"min_pixels": int(lo), "max_pixels": int(hi)}


CALLS = CallRules({k: k for k in ("min_pixels", "max_pixels", "patch_size", "merge_size",
                                  "temporal_patch_size")}, _call_size)


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Qwen2-VL constructor arguments for cfg."""
    return dict(size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels},
                patch_size=cfg.patch_size, temporal_patch_size=cfg.temporal_patch_size,
                merge_size=cfg.merge_size, image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample)


_HF = "transformers.models.qwen2_vl.image_processing"
REFERENCE = Reference({"pil": f"{_HF}_pil_qwen2_vl:Qwen2VLImageProcessorPil",
                       "torchvision": f"{_HF}_qwen2_vl:Qwen2VLImageProcessor"}, _reference_kwargs)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Qwen attributes transformers' class holds."""
    return dict(temporal_patch_size=cfg.temporal_patch_size, min_pixels=cfg.min_pixels,
                max_pixels=cfg.max_pixels,
                size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels})


def _call_kwargs() -> type:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorKwargs,
    )

    return Qwen2VLImageProcessorKwargs


def _family_of(kwargs: dict[str, Any]) -> str:
    """Qwen3-VL's patch size is 16; Qwen2-VL and Qwen2.5-VL compute alike."""
    return "qwen3_vl" if int(kwargs.get("patch_size") or 14) == 16 else "qwen2_vl"


def _count_patches(proc: Any, height: int, width: int, kw: dict[str, Any]) -> int:
    """Grid cells for an image of this size, as transformers' get_number_of_image_patches.

    They are counted from the drop-in's attributes and a call's options."""
    lo = kw.get("min_pixels", proc.size["shortest_edge"])
    hi = kw.get("max_pixels", proc.size["longest_edge"])
    patch = kw.get("patch_size", proc.patch_size)
    factor = patch * kw.get("merge_size", proc.merge_size)
    check_aspect(0, width, height)  # transformers' smart_resize refuses it here too
    h, w = smart_resize(height, width, factor, lo, hi)
    return (h // patch) * (w // patch)


DROPIN = DropIn({"Qwen2VLImageProcessor": "torchvision", "Qwen2VLImageProcessorPil": "pil"},
                _attributes, _call_kwargs, _family_of, count_patches=_count_patches,
                in_engines=True)  # tests/engines/test_engine_vllm.py, test_engine_sglang.py
_OPTIONS = frozenset({"min_pixels", "max_pixels", "temporal_patch_size", "rescale_factor"})


def _family(name: str, builtin: ProcessorConfig, recognizes: Any = lambda pre: False,
            model_types: tuple[str, ...] = ()) -> Family:
    return register(Family(name, QwenVLProcessor, builtin, _OPTIONS, read_folder, CALLS,
                           HF_CLASS_DEFAULTS, validate, model_types=(name, *model_types),
                           recognizes=recognizes, reference=REFERENCE, dropin=DROPIN))


# Published Qwen2-VL-7B-Instruct / Qwen2.5-VL-7B-Instruct preprocessor configs. Models whose
# folders name Qwen2VLImageProcessor with other numbers (a folder's values win) join the family
# of their patch size: dots.ocr (dots_ocr: temporal patch 1), Qwen2.5-Omni's image path.
_family("qwen2_vl", ProcessorConfig("qwen2_vl", 14, 2, 2, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                                    min_pixels=3136, max_pixels=12845056),
        lambda pre: _is_qwen_processor(pre) and int(pre.get("patch_size", 14)) != 16,
        ("dots_ocr",))
_family("qwen2_5_vl", ProcessorConfig("qwen2_5_vl", 14, 2, 2, OPENAI_CLIP_MEAN,
                                      OPENAI_CLIP_STD, min_pixels=3136, max_pixels=12845056),
        model_types=("qwen2_5_omni",))
# Qwen3-VL-8B-Instruct: size 65536..16777216, patch 16, mean/std 0.5 (and its MoE sibling);
# the patch-16 image paths of Qwen3-Omni and Qwen3.5 (dense and MoE) likewise.
QWEN3 = _family("qwen3_vl", ProcessorConfig("qwen3_vl", 16, 2, 2, HALF, HALF, min_pixels=65536,
                                            max_pixels=16777216),
                lambda pre: _is_qwen_processor(pre) and int(pre.get("patch_size", 14)) == 16,
                ("qwen3_vl_moe", "qwen3_omni_moe", "qwen3_5", "qwen3_5_moe"))

__all__ = ["QwenVLProcessor", "smart_resize"]
