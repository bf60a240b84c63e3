"""Pan-and-scan crop geometry: an image of exaggerated aspect as a row or column of crops.

Gemma 3's rule, as transformers' Gemma3 image processors compute it: a landscape (or square)
image whose width / height reaches the activation ratio is cut into n side-by-side crops, n the
aspect rounded half up, at most width // min_crop_size, then clamped to [2, max_num_crops]; a
portrait one likewise top to bottom. Each crop is ceil(side / n) pixels along the cut axis (the
last one truncated at the edge) and the whole image across it; no crops when a crop would be
smaller than min_crop_size on either side. Crops are listed row by row."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidImageError


@dataclass(frozen=True)
class PanAndScan:
    """The settings of one call (all three are required when pan-and-scan is on)."""

    min_crop_size: int
    max_num_crops: int
    min_ratio_to_activate: float


def crop_boxes(width: int, height: int, pas: PanAndScan,
               index: int = 0) -> list[tuple[int, int, int, int]]:
    """The crops (x, y, w, h) of a width x height image, in order; [] when none apply."""
    long_side, short_side = (width, height) if width >= height else (height, width)
    if long_side / short_side < pas.min_ratio_to_activate:
        return []
    n = int(math.floor(long_side / short_side + 0.5))
    n = min(int(math.floor(long_side / pas.min_crop_size)), n)
    n = min(pas.max_num_crops, max(2, n))
    cols, rows = (n, 1) if width >= height else (1, n)
    crop_w, crop_h = int(math.ceil(width / cols)), int(math.ceil(height / rows))
    if min(crop_w, crop_h) < pas.min_crop_size:
        return []
    boxes = []
    for r in range(rows):
        for c in range(cols):
            x, y = c * crop_w, r * crop_h
            w, h = min(crop_w, width - x), min(crop_h, height - y)
            if w < 1 or h < 1:
                raise InvalidImageError(index, f"pan-and-scan of {width}x{height} leaves an "
                                               f"empty crop")
            boxes.append((x, y, w, h))
    return boxes


__all__ = ["PanAndScan", "crop_boxes"]
