"""The torchvision backend: what transformers' torchvision image processors
(``Qwen2VLImageProcessor``, ``Kimi_K25ImageProcessor``) do differently from the PIL backend and
from Kimi's upstream code, computed without torch or torchvision.

- resize: torch's uint8 antialiased bicubic (``_native.Resampler.TORCH``), horizontal pass first;
- rescale + normalize fused: ``(f32(u) - M) / S`` with mean and std scaled by 1/rescale_factor in
  float32 (``_native.LutRecipe.TORCH_FUSED_NORMALIZE``);
- PIL inputs convert as in the PIL backend (alpha composited onto white), for Kimi too;
- numpy (H, W, 4) inputs are blended onto white in float32 by torchvision's ``to_dtype`` rules,
  not the PIL backend's float64 rounding (``composite_on_white``).

Sizes (smart_resize, navit), patch order and the temporal copy are the same as the other
backends'.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _native
from ..media import check_size

NAME = "torchvision"
LUT_TORCH = _native.LutRecipe.TORCH_FUSED_NORMALIZE
RESAMPLER = _native.Resampler.TORCH


@functools.lru_cache(maxsize=1)
def _composite_table() -> np.ndarray:
    """[colour, alpha] -> blended uint8: tvF.to_dtype(uint8 -> float32) multiplies by
    f32(1/255); c * a + (1 - a) in float32; to_dtype(float32 -> uint8) multiplies by
    f32(255 + 1 - 1e-3) and truncates."""
    u = np.arange(256, dtype=np.float32) * np.float32(1.0 / 255)
    c, a = u[:, None], u[None, :]
    blended = c * a + (np.float32(1) - a)
    table = (blended * np.float32(255 + 1.0 - 1e-3)).astype(np.uint8)
    table.setflags(write=False)
    return table


def composite_on_white(rgba: np.ndarray) -> np.ndarray:
    """An (H, W, 4) uint8 array blended onto white as the torchvision backend's convert_to_rgb
    does; returns a new packed (H, W, 3) array."""
    table = _composite_table()
    alpha = rgba[:, :, 3]
    out = np.empty(rgba.shape[:2] + (3,), dtype=np.uint8)
    for ch in range(3):
        out[:, :, ch] = table[rgba[:, :, ch], alpha]
    return out


def adapt_input(index: int, item: Any, max_pixels: int | None) -> Any:
    """item as the torchvision backend sees it: a numpy RGBA array is blended here (after the
    size check, before anything is allocated for it); everything else passes unchanged."""
    if isinstance(item, np.ndarray) and item.dtype == np.uint8 and item.ndim == 3 \
            and item.shape[2] == 4:
        check_size(index, item.shape[1], item.shape[0], max_pixels)
        return composite_on_white(item)
    return item


__all__ = ["LUT_TORCH", "NAME", "RESAMPLER", "adapt_input", "composite_on_white"]
