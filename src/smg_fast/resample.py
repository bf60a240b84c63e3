"""Pillow-exact resize of uint8 arrays (the native resampler, exposed for direct use)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _native

HORIZONTAL_FIRST = "horizontal_first"
PILLOW13 = "pillow13"
_ORDERS = {HORIZONTAL_FIRST: _native.PassOrder.HORIZONTAL_FIRST,
           PILLOW13: _native.PassOrder.PILLOW13}
_FILTERS = {int(f): f for f in _native.Filter.__members__.values()}


def pillow_pass_order() -> str:
    """The pass order of the installed Pillow: 13.x may run the vertical pass first."""
    import PIL

    major = int(PIL.__version__.split(".")[0])
    return PILLOW13 if major >= 13 else HORIZONTAL_FIRST


def native_pass_order(pass_order: str | None) -> _native.PassOrder:
    """The native enum for a pass order name (None: the installed Pillow's)."""
    if pass_order is None:
        pass_order = pillow_pass_order()
    if pass_order not in _ORDERS:
        raise ValueError(f"pass_order must be one of {sorted(_ORDERS)} or None, got {pass_order!r}")
    return _ORDERS[pass_order]


def native_filter(resample: Any) -> _native.Filter:
    """The native enum for a filter given as PIL.Image.Resampling or its integer value."""
    code = int(resample)
    if code not in _FILTERS:
        raise ValueError(f"unknown resampling filter {resample!r} (use PIL.Image.Resampling)")
    return _FILTERS[code]


def resize(
    image: np.ndarray,
    size: tuple[int, int],
    resample: Any = 3,
    pass_order: str | None = None,
) -> np.ndarray:
    """Resizes a uint8 (H, W) or (H, W, C<=4) array to ``size`` = (width, height).

    Bit-identical to ``PIL.Image.fromarray(image).resize(size, resample)`` for L and RGB images
    (4 channels behave like Pillow's RGBX/CMYK, without RGBA's premultiplication). ``resample``
    takes ``PIL.Image.Resampling`` values (default BICUBIC). ``pass_order`` None follows the
    installed Pillow; "horizontal_first" (Pillow <= 12) and "pillow13" force one rule.
    """
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise TypeError(f"resize expects a uint8 array, got {arr.dtype}")
    if arr.ndim == 3 and (arr.strides[2] != 1 or arr.strides[1] != arr.shape[2]) or (
        arr.ndim == 2 and arr.strides[1] != 1
    ) or (arr.ndim >= 2 and arr.strides[0] < 0):
        arr = np.ascontiguousarray(arr)
    if arr.ndim == 3 and arr.shape[2] not in (1, 3, 4):
        # 2 channels would be Pillow's LA, which it premultiplies by alpha: not this function.
        raise ValueError(f"resize expects 1, 3 or 4 channels, got shape {arr.shape}")
    width, height = (int(v) for v in size)
    return _native.resize(arr, width, height, native_filter(resample),
                          native_pass_order(pass_order))
