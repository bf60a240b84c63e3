"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL: transformers' smart_resize, BICUBIC, merge-ordered patches
with the temporal copy; output [sum(gh*gw), 3*T*P*P]."""

from __future__ import annotations

import math

from ..errors import InvalidImageError
from .base import Plan, Processor, check_aspect


def smart_resize(height: int, width: int, factor: int, min_pixels: int,
                 max_pixels: int) -> tuple[int, int]:
    """(height, width) rounded to multiples of factor with the pixel count in range.

    Same float64 arithmetic and Python round (half to even) as transformers; no re-check after
    the min/max branch, as there.
    """
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


class QwenVLProcessor(Processor):
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
