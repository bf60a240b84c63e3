"""The processor machinery shared by every family: input handling, one output allocation per
call, one native call per image writing straight into its slice of the output."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from .._dtypes import DTYPES, parse_dtype, to_torch
from ..config import ProcessorConfig
from ..errors import InvalidImageError
from ..media import ImageInput, load_rgb
from ..resample import order_code

LUT_HF = 0  # f32(f32(f64(u) * rescale) - mean) / std
LUT_KIMI = 1  # (f32(f64(u) / 255) - mean) * f32(1 / std)


@dataclass(frozen=True)
class Plan:
    """Sizes for one image: resize target, then the patch grid (which may include padding)."""

    resize_w: int
    resize_h: int
    grid_h: int
    grid_w: int


class ProcessorOutput(dict):
    """HF-style result: a dict with attribute access (``out.pixel_values``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Processor(ABC):
    """Turns images into a family's encoder inputs, bit-identical to its reference."""

    lut_recipe: int = LUT_HF

    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self._luts: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"

    # ---- per-family geometry ----

    @abstractmethod
    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        """Sizes for a width x height image; raises InvalidImageError for impossible sizes."""

    @abstractmethod
    def _layout(self) -> tuple[int, int]:
        """(merge, temporal) of the native patch layout."""

    @abstractmethod
    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        """Shape of pixel_values for `rows` patches."""

    # ---- public API ----

    def grid(self, width: int, height: int) -> tuple[int, int, int]:
        """(t, h, w) of ``image_grid_thw`` for an image of this size, without pixels."""
        p = self.plan(int(width), int(height))
        return (1, p.grid_h, p.grid_w)

    def num_tokens(self, width: int, height: int) -> int:
        """LLM tokens for an image of this size: grid cells / merge_size^2."""
        _, gh, gw = self.grid(width, height)
        return gh * gw // (self.config.merge_size**2)

    def lut(self, dtype: str) -> np.ndarray:
        """The 3 x 256 normalization table in the output dtype (built once, then cached)."""
        table = self._luts.get(dtype)
        if table is None:
            cfg = self.config
            code = DTYPES[dtype][0]
            with self._lock:
                table = _native.build_lut(self.lut_recipe, cfg.rescale_factor,
                                          list(cfg.image_mean), list(cfg.image_std), code)
                self._luts[dtype] = table
        return table

    def __call__(
        self,
        images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
        return_tensors: str | None = "np",
        dtype: Any = "float32",
    ) -> ProcessorOutput:
        """Preprocesses one image or a list of images.

        Returns ``pixel_values`` (all images' patches concatenated in order), ``image_grid_thw``
        (int64, one [t, h, w] row per image) and ``num_tokens`` (int64 per image). For
        ``dtype="bfloat16"`` with numpy output the array is uint16 holding bfloat16 bits.
        """
        dtype_name = parse_dtype(dtype)
        if return_tensors not in (None, "np", "pt"):
            raise ValueError(f"return_tensors must be 'np' or 'pt', got {return_tensors!r}")
        items = list(images) if isinstance(images, (list, tuple)) else [images]
        if not items:
            raise ValueError("no images given")
        cfg = self.config
        arrays = [load_rgb(i, it, hf=cfg.is_qwen, max_pixels=cfg.max_image_pixels)
                  for i, it in enumerate(items)]
        plans = [self.plan(a.shape[1], a.shape[0], i) for i, a in enumerate(arrays)]
        merge, temporal = self._layout()
        p = cfg.patch_size
        row_elems = 3 * temporal * p * p
        rows = [pl.grid_h * pl.grid_w for pl in plans]
        total = sum(rows)
        code, np_dtype = DTYPES[dtype_name]
        flat = _native.pooled_empty(total * row_elems * np_dtype.itemsize).view(np_dtype)
        lut = self.lut(dtype_name)
        order = order_code(cfg.pass_order)
        offset = 0
        for arr, pl, n in zip(arrays, plans, rows, strict=True):
            _native.preprocess_into(arr, pl.resize_w, pl.resize_h, cfg.resample, order, p, merge,
                                    temporal, pl.grid_h, pl.grid_w, lut, self.lut_recipe,
                                    cfg.rescale_factor, list(cfg.image_mean), list(cfg.image_std),
                                    code, flat, offset)
            offset += n * row_elems
        pixel_values = flat.reshape(self._pixel_shape(total))
        grid = np.array([[1, pl.grid_h, pl.grid_w] for pl in plans], dtype=np.int64)
        tokens = grid[:, 1] * grid[:, 2] // (cfg.merge_size**2)
        return self._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        if return_tensors == "pt":
            import torch

            return ProcessorOutput(pixel_values=to_torch(pixel_values, dtype_name),
                                   image_grid_thw=torch.from_numpy(grid),
                                   num_tokens=torch.from_numpy(tokens))
        return ProcessorOutput(pixel_values=pixel_values, image_grid_thw=grid, num_tokens=tokens)


def check_aspect(index: int, width: int, height: int, limit: float = 200) -> None:
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    ratio = max(height, width) / min(height, width)
    if ratio > limit:
        raise InvalidImageError(index, f"absolute aspect ratio must be at most {limit:g}, "
                                       f"got {ratio:g} ({width}x{height})")


__all__ = ["Plan", "Processor", "ProcessorOutput", "check_aspect"]
