"""Kimi-K2.5 (MoonViT): the upstream navit resize (never upscales, truncates, caps each side),
BICUBIC, zero padding right/bottom to a multiple of patch*merge, patches [N, 3, P, P] in
row-major order, grid in P-pixel patches. Normalization follows the upstream NumPy code:
(f32(u / 255) - mean) * f32(1 / std)."""

from __future__ import annotations

import math

import numpy as np

from .base import LUT_KIMI, Plan, Processor, ProcessorOutput, check_aspect


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


__all__ = ["KimiK25Processor", "navit_size"]
