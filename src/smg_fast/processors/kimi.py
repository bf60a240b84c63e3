"""Kimi-K2.5 (MoonViT): the upstream navit resize (never upscales, truncates, caps each side),
BICUBIC, zero padding right/bottom to a multiple of patch*merge, patches [N, 3, P, P] in
row-major order, grid in P-pixel patches. Normalization follows the upstream NumPy code, which
subtracts a float64 mean from float32 pixels and multiplies by a float64 1 / std in place: each
step computed in float64 and stored as float32."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .config import HALF, ProcessorConfig
from .plan import Plan, check_aspect
from .processor import LUT_KIMI, Processor, ProcessorOutput
from .registry import Family, register


def navit_size(width: int, height: int, patch: int, merge: int, in_patch_limit: int,
               per_side: int) -> tuple[int, int, int, int]:
    """(new_w, new_h, pad_w, pad_h) exactly as the upstream media code computes them."""
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch) * max(1.0, height // patch)))
    s2 = per_side * patch / width
    s3 = per_side * patch / height
    scale = min(1.0, s1, s2, s3)
    new_w = min(max(1, int(width * scale)), per_side * patch)
    new_h = min(max(1, int(height * scale)), per_side * patch)
    factor = merge * patch
    return new_w, new_h, (factor - new_w % factor) % factor, (factor - new_h % factor) % factor


class KimiK25Processor(Processor):
    lut_recipe = LUT_KIMI
    load_like_transformers = False  # upstream: convert("RGB") (alpha dropped), no EXIF
    per_request_pixels = False

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        new_w, new_h, pad_w, pad_h = navit_size(width, height, cfg.patch_size, cfg.merge_size,
                                                cfg.in_patch_limit, cfg.patch_limit_on_one_side)
        return Plan(resize_w=new_w, resize_h=new_h, grid_h=(new_h + pad_h) // cfg.patch_size,
                    grid_w=(new_w + pad_w) // cfg.patch_size)

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major patches, no temporal copy

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows, 3, p, p)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        out["grid_thws"] = out["image_grid_thw"]  # the upstream key
        return out


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of Kimi-K2.5's preprocessor_config.json (under media_proc_cfg)."""
    media = pre.get("media_proc_cfg", pre)
    out: dict[str, Any] = {}
    for key in ("in_patch_limit", "patch_limit_on_one_side", "patch_size", "image_mean",
                "image_std", "merge_kernel_size"):
        if media.get(key) is not None:
            out[key] = media[key]
    return out


def validate(cfg: ProcessorConfig) -> None:
    if not cfg.in_patch_limit or not cfg.patch_limit_on_one_side:
        raise ValueError("in_patch_limit and patch_limit_on_one_side must be positive")


# Kimi-K2.5 media_proc_cfg.
register(Family("kimi_k25", KimiK25Processor,
                ProcessorConfig("kimi_k25", 14, 2, 1, HALF, HALF, in_patch_limit=16384,
                                patch_limit_on_one_side=512, backend="upstream"),
                frozenset({"in_patch_limit", "patch_limit_on_one_side", "merge_kernel_size"}),
                read_folder, validate=validate, model_types=("kimi_k25",),
                recognizes=lambda pre: "media_proc_cfg" in pre, unambiguous=True,
                backends=("upstream", "torchvision")))

__all__ = ["KimiK25Processor", "navit_size"]
