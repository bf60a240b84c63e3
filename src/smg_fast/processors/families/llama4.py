"""Llama 4 (Scout, Maverick): best-fit tile canvases, a global tile, bfloat16 normalize.

transformers' Llama4ImageProcessor (torchvision only): among the factor-pair canvases of up to
max_patches tiles of size x size (336 published), the best fit (the smallest upscale, else the
largest downscale, then the least area) is chosen; the image is resized without distortion to
fit it (torch's uint8 antialiased BILINEAR, never upscaled past one tile's side), zero-padded
right and bottom, and cut into tiles row by row; with more than one tile the whole image
squashed to one tile follows as the global tile (processors/tiles.py). Rescale and normalize run
in bfloat16 as that class runs them (processors/bf16_normalize.py): pixel_values
[sum of tiles, 3, size, size] in bfloat16 (uint16 bits with NumPy), and aspect_ratios (int64
[rows, columns] of each image's canvas). Each tile is (336 / 14)^2 / 4 = 144 <|patch|> tokens
in the prompt (Llama4Processor's pixel shuffle), the global tile too. Registers the family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import UnsupportedCallError
from ..bf16_normalize import TablePipeline, bf16_table, table_of
from ..config import HALF, ProcessorConfig, whole_field
from ..hooks import CallRules, DropIn, Reference, names_class
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from ..tiles import MAX_TILES, best_fit_plan
from ..torchvision import NAME as TORCHVISION
from . import gemma3

VISION_PATCH = 14  # Llama4Processor's patch_size
DOWNSAMPLE = 4  # 1 / pixel_shuffle_ratio^2 (0.5)
CLASS = "transformers.models.llama4.image_processing_llama4:Llama4ImageProcessor"


class Llama4Processor(Processor):
    """Llama 4's best-fit tiles, then its global tile, each (3, size, size) in bfloat16."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        return best_fit_plan(width, height, self.config.patch_size,
                             int(self.config.max_patches or 0))

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major tiles, each a channel-first (3, size, size) image

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        side = self.config.patch_size
        return (rows, 3, side, side)

    def pipeline(self, dtype: str) -> Any:
        """The bfloat16 table over the uint8 pipeline; rescale alone as the base class's."""
        if dtype == "uint8" or not self.config.do_normalize:
            return super().pipeline(dtype)
        pipe = self._pipelines.get(dtype)
        if pipe is None:
            cfg = self.config
            bits = bf16_table(cfg.rescale_factor, cfg.image_mean, cfg.image_std)
            pipe = TablePipeline(super().pipeline("uint8"), table_of(bits, dtype), dtype)
            with self._lock:
                pipe = self._pipelines.setdefault(dtype, pipe)
        return pipe

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        per_tile = (self.config.patch_size // VISION_PATCH) ** 2 // DOWNSAMPLE
        return tiles_per_image(grid) * per_tile

    def __call__(self, images: Any = None, return_tensors: str | None = "np",
                 dtype: Any = "bfloat16", *, channels_first_wins: bool = False,
                 **options: Any) -> ProcessorOutput:
        """Processor.__call__ in bfloat16 by default (transformers' dtype for Llama 4)."""
        return Processor.__call__(self, images, return_tensors, dtype,
                                  channels_first_wins=channels_first_wins, **options)

    def _wrap(self, pixel_values: Any, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        ratios = np.ascontiguousarray(grid[:, 1:])
        if return_tensors == "pt":
            import torch

            out["aspect_ratios"] = torch.from_numpy(ratios)
        else:
            out["aspect_ratios"] = ratios
        del out["image_grid_thw"]  # not Llama 4's: aspect_ratios says each image's canvas
        return out


def tiles_per_image(grid: np.ndarray) -> np.ndarray:
    """Tiles per image for (n, 3) grid rows [1, rows, columns]: the canvas, and a global tile."""
    cells = grid[:, 1] * grid[:, 2]
    return (cells + (cells > 1)).astype(np.int64)


def _call_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Llama 4's own options: resize_to_max_canvas=False (the default) changes nothing."""
    opts = dict(opts)
    if opts.pop("resize_to_max_canvas", None):
        raise UnsupportedCallError("resize_to_max_canvas=True is not computed by smg-fast")
    if opts.get("do_resize") is False:
        raise UnsupportedCallError("do_resize=False: Llama 4 always resizes (transformers "
                                   "refuses it too)")
    if opts.get("do_rescale") is False and opts.get("do_normalize") is not False:
        raise UnsupportedCallError("do_rescale=False with do_normalize: transformers' class "
                                   "normalizes the uint8 image and raises TypeError")
    patches = opts.get("max_patches")
    if patches is not None and (isinstance(patches, bool) or not isinstance(patches, int)):
        raise UnsupportedCallError(f"max_patches must be an int (transformers' class refuses "
                                   f"others), got {patches!r}")
    return opts


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Llama 4 preprocessor_config.json: a square size, max_patches."""
    out = gemma3.read_folder(pre)
    if pre.get("max_patches") is not None:
        out["max_patches"] = pre["max_patches"]
    if pre.get("resize_to_max_canvas"):
        raise ValueError("resize_to_max_canvas=True is not supported")
    return out


def coerce(fields: dict[str, Any]) -> dict[str, Any]:
    """max_patches as an int (JSON and callers may give other numbers)."""
    out = dict(fields)
    if out.get("max_patches") is not None:
        out["max_patches"] = whole_field("max_patches", out["max_patches"])
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the layout is whole tiles and the tile count is bounded."""
    gemma3.validate(cfg)
    if cfg.backend != TORCHVISION:
        raise ValueError("llama4 is transformers' torchvision class only: backend "
                         "'torchvision'")
    if cfg.max_patches is None or not 1 <= cfg.max_patches <= MAX_TILES:
        raise ValueError(f"max_patches must be 1..{MAX_TILES}, got {cfg.max_patches}")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Llama4ImageProcessor constructor arguments for cfg."""
    return {**gemma3._reference_kwargs(cfg), "max_patches": cfg.max_patches,
            "do_normalize": cfg.do_normalize}


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Llama 4 attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, max_patches=cfg.max_patches,
                resize_to_max_canvas=False)


def _call_kwargs() -> type:
    """Llama 4's call options: ImagesKwargs with max_patches and resize_to_max_canvas.

    transformers' own TypedDict lives in a module that imports torchvision; this one has its
    keys."""
    from transformers.processing_utils import ImagesKwargs

    class Llama4ImageProcessorKwargs(ImagesKwargs, total=False):  # type: ignore[misc, call-arg]
        max_patches: int
        resize_to_max_canvas: bool

    return Llama4ImageProcessorKwargs


def _dtype(kwargs: dict[str, Any]) -> str:
    """bfloat16 where transformers' class rescales and normalizes; float32 for rescale alone."""
    both = kwargs.get("do_rescale") is not False and kwargs.get("do_normalize") is not False
    return "bfloat16" if both else "float32"


def _untyped(data: dict[str, Any]) -> dict[str, Any]:
    """pixel_values as one tensor of tiles per image, aspect_ratios one row per image."""
    ratios = data["aspect_ratios"]
    cells = np.asarray(ratios)[:, 0] * np.asarray(ratios)[:, 1]
    bounds = np.cumsum(cells + (cells > 1))[:-1].tolist()
    pixels = data["pixel_values"]
    split = np.split(pixels, bounds) if isinstance(pixels, np.ndarray) else \
        list(pixels.tensor_split(bounds))
    return {"pixel_values": split, "aspect_ratios": list(ratios)}


# meta-llama/Llama-4-Scout-17B-16E-Instruct preprocessor_config.json (as transformers' class
# defaults and docs give it; no hub access here): Llama4ImageProcessorFast, size 336x336,
# max_patches 16, resize_to_max_canvas false, resample 2 (BILINEAR), rescale 1/255, mean / std
# [0.5, 0.5, 0.5], do_convert_rgb / do_rescale / do_normalize / do_resize true; config.json
# model_type "llama4".
register(Family(
    "llama4", Llama4Processor,
    ProcessorConfig("llama4", 336, 1, 1, HALF, HALF, resample=2, backend=TORCHVISION,
                    max_patches=16),
    frozenset({"rescale_factor", "max_patches"}), read_folder,
    CallRules({"max_patches": "max_patches"}, gemma3._call_size, options=_call_options),
    # transformers' class defaults, for what a folder lacks (the same values as above)
    folder_defaults={"patch_size": 336, "resample": 2, "image_mean": HALF, "image_std": HALF,
                     "rescale_factor": 1 / 255, "max_patches": 16},
    validate=validate, model_types=("llama4",), coerce=coerce,
    recognizes=names_class("Llama4ImageProcessor"),
    backends=(TORCHVISION,),
    reference=Reference({TORCHVISION: CLASS}, _reference_kwargs,
                        missing={"pil": "transformers has no PIL class for Llama 4"}),
    dropin=DropIn({"Llama4ImageProcessor": TORCHVISION},
                  _attributes, _call_kwargs, lambda kwargs: "llama4",
                  # in_engines: tests/engines/test_engine_{vllm,sglang}_tiles.py
                  outputs=("pixel_values", "aspect_ratios"), in_engines=True,
                  lists_when_untyped=True, list_outputs=("aspect_ratios",),
                  dtype=_dtype, untyped=_untyped)))

__all__ = ["Llama4Processor", "tiles_per_image"]
