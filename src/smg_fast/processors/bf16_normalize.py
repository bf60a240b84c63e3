"""Rescale and normalize computed in bfloat16, as a table of the resized uint8 pixel.

transformers' Llama 4 image processor rescales and normalizes in torch.bfloat16: the resized
uint8 image is converted to bfloat16 (exact: every byte is a bfloat16), multiplied by the
rescale factor, then has the mean subtracted and is divided by the std (tvF.normalize with
bfloat16 mean / std tensors). torch computes each bfloat16 operation in float32 (the Python
scalar rescale rounded to float32) and rounds its result to bfloat16 (to nearest, ties to even):
three roundings, so each output value is a per-channel function of the resized byte alone, and a
3 x 256 table reproduces it. The native pipeline writes the resized bytes (its uint8 output, the
grid past the resize pixel 0) and ``expand_lut`` writes the table's values in their place.

A float32 or float16 output holds the same bfloat16 values widened (what ``.to(dtype)`` of
transformers' tensor gives)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _native
from .._dtypes import DTYPES


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 bits (to nearest, ties to even; no NaN here)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits as float32 values (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_table(rescale: float, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """The 3 x 256 bfloat16 bits (uint16) of bf16(bf16(bf16(u) * rescale) - mean) / std."""
    scaled = _to_bf16(np.arange(256, dtype=np.float32) * np.float32(rescale))
    out = np.empty((3, 256), np.uint16)
    with np.errstate(all="ignore"):
        for c in range(3):
            m = _from_bf16(_to_bf16(np.float32(mean[c])))
            s = _from_bf16(_to_bf16(np.float32(std[c])))
            if not (np.isfinite(m) and np.isfinite(s) and s != 0):
                raise ValueError("image_mean and image_std must be finite in bfloat16, std "
                                 "non-zero")
            out[c] = _to_bf16(_from_bf16(_to_bf16(_from_bf16(scaled) - m)) / s)
    return out


def table_of(bits: np.ndarray, dtype: str) -> np.ndarray:
    """The bfloat16 table ``bits`` as a table of dtype (bfloat16: the bits themselves)."""
    if dtype == "bfloat16":
        return bits
    return _from_bf16(bits).astype(DTYPES[dtype][1])


class TablePipeline:
    """A uint8 native pipeline whose bytes are written as a given table's values.

    It stands in for ``_native.Pipeline`` where the batch code runs one: ``run`` writes the
    resized bytes of a part into pooled scratch and expands them into ``dst`` at ``offset``;
    ``lut`` is the table (its pixel-0 entry is what placed tiles pad with)."""

    def __init__(self, codes: _native.Pipeline, table: np.ndarray, dtype: str) -> None:
        self._codes = codes
        self.lut = np.ascontiguousarray(table)
        self.lut.flags.writeable = False
        self.dtype_name = dtype
        self.dtype = DTYPES[dtype][0]
        self._run = codes.patch * codes.patch * codes.temporal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._codes, name)

    @property
    def kernel(self) -> str:
        """The uint8 pipeline's patchify ("copy"), then the table's expansion."""
        return "copy+table"

    def run(self, src: np.ndarray, resize_w: int, resize_h: int, grid_h: int, grid_w: int,
            dst: np.ndarray, offset: int = 0, **kwargs: Any) -> Any:
        """Pipeline.run: the resized bytes, then their table values into dst at offset."""
        n = self._codes.output_elems(resize_w, resize_h, grid_h, grid_w)
        flat = dst.reshape(-1)
        if flat.dtype != self.lut.dtype or offset < 0 or offset + n > flat.size:
            raise ValueError(f"destination must be {self.lut.dtype} with {offset + n} elements")
        codes = _native.pooled_empty(n, huge_pages=False)
        got = self._codes.run(src, resize_w, resize_h, grid_h, grid_w, codes, 0, **kwargs)
        _native.expand_lut(codes, self.lut, self._run, flat[offset:offset + n])
        return got


__all__ = ["TablePipeline", "bf16_table", "table_of"]
