"""Phi-4-multimodal: up to 36 crops of 448, a global image resized from them, attention masks.

transformers' Phi4MultimodalImageProcessor (torchvision only): the image's grid is
ceil(width / 448) x ceil(height / 448) crops, or, past dynamic_hd crops, the closest aspect
ratio among the grids of at most dynamic_hd crops (processors/tiles.py's rule over the set-ordered
candidates). The image is resized to fit the grid's canvas without distortion (torch's uint8
antialiased BILINEAR, the other side truncated), padded right and bottom with 255, rescaled and
normalized, and cut into crops row by row; the global image is the normalized float canvas
resized to 448 x 448 by torch's BICUBIC without antialias (the native bicubic_float_tiles) and
goes first. A batch pads every image to the most crops (zero crops, all-ones masks):
image_pixel_values [images, 1 + crops, 3, 448, 448] float32, image_sizes int64 [canvas height,
width], image_attention_mask float32 [images, 1 + crops, 32, 32] (the 14-pixel patches the
padding covers are 0), num_img_tokens per image (from the mask, as Phi4MultimodalProcessor
counts <|image|> tokens); pixel_values and num_tokens are the same rows and counts under the
names every family returns (the service sends each image's rows). Registers the family."""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from typing import Any

import numpy as np

from ... import _native
from ...errors import InvalidImageError, UnsupportedCallError
from ..config import HALF, ProcessorConfig, whole_field
from ..folders import auto_backend
from ..hooks import CallRules, DropIn, Reference, names_class
from ..plan import Plan
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from ..tiles import MAX_TILES, closest_grid, set_order_candidates
from ..torchvision import NAME as TORCHVISION
from . import gemma3

VISION_PATCH = 14  # transformers' patch_size: the mask's cell
BILINEAR = 2  # the crops' resize (torchvision's default interpolation)
CLASS = ("transformers.models.phi4_multimodal.image_processing_phi4_multimodal:"
         "Phi4MultimodalImageProcessor")
MIN_SIDE = 10  # transformers refuses a resize with a side under 10 ("very extreme" aspect)


@lru_cache(maxsize=64)
def crop_geometry(width: int, height: int, tile: int, max_crops: int
                  ) -> tuple[int, int, int, int]:
    """(columns, rows, resized width, resized height) of a width x height image.

    ValueError where transformers' class refuses the image (a resized side under 10)."""
    cols, rows = math.ceil(width / float(tile)), math.ceil(height / float(tile))
    if cols * rows > max_crops:
        cols, rows = closest_grid(width, height, tile, tile, set_order_candidates(1, max_crops))
    canvas_w, canvas_h = tile * cols, tile * rows
    ratio_w, ratio_h = canvas_w / width, canvas_h / height
    if ratio_w < ratio_h:
        new_w, new_h = canvas_w, int(height * ratio_w)
    else:
        new_w, new_h = int(width * ratio_h), canvas_h
    if min(new_h, canvas_h) < MIN_SIDE or min(new_w, canvas_w) < MIN_SIDE:
        raise ValueError(f"the aspect ratio is too extreme: resized to {new_w}x{new_h}")
    return cols, rows, new_w, new_h


def crop_masks(cols: int, rows: int, new_w: int, new_h: int, tile: int) -> np.ndarray:
    """float32 [1 + crops, tile / 14, tile / 14]: the global image's mask, then each crop's."""
    side = tile // VISION_PATCH
    mask = np.ones((rows * side, cols * side), np.float32)
    pad_w, pad_h = cols * tile - new_w, rows * tile - new_h
    if pad_w >= VISION_PATCH:
        mask[:, mask.shape[1] - pad_w // VISION_PATCH:] = 0
    if pad_h >= VISION_PATCH:
        mask[mask.shape[0] - pad_h // VISION_PATCH:, :] = 0
    crops = mask.reshape(rows, side, cols, side).transpose(0, 2, 1, 3).reshape(-1, side, side)
    return np.concatenate([np.ones((1, side, side), np.float32), crops])


def image_tokens(masks: np.ndarray, cols: int, rows: int) -> int:
    """<|image|> tokens of one image from its crops' masks (masks[1:]), as transformers counts."""
    half = masks[1:, 0::2, 0::2]
    n = half.shape[1]
    grid = half.reshape(rows, cols, n, n).transpose(0, 2, 1, 3).reshape(rows * n, cols * n)
    return 256 + 1 + int(grid.sum()) + int(grid[:, 0].sum()) + 16


class Phi4MultimodalProcessor(Processor):
    """The global image, then the crops, each (3, 448, 448) float32, batches padded."""

    resize_filter = BILINEAR
    compact_exact = False  # the global image is not a table of uint8 pixels

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        if width < 1 or height < 1:
            raise InvalidImageError(index, f"zero-size image ({width}x{height})")
        tile = self.config.patch_size
        try:
            cols, rows, new_w, new_h = crop_geometry(width, height, tile,
                                                     int(self.config.max_patches or 0))
        except ValueError as exc:
            raise InvalidImageError(index, f"{exc} ({width}x{height})") from None
        return Plan(new_w, new_h, rows, cols, lead_rows=1, grid_thw=(1, new_h, new_w))

    def pad_batch(self, plans: list[Plan]) -> list[Plan]:
        most = max(p.cells for p in plans)
        return [dataclasses.replace(p, pad_rows=most - p.cells) for p in plans]

    def finish(self, pipe: _native.Pipeline, plan: Plan, flat: np.ndarray, offset: int) -> None:
        """Pads the crops past the resize with pixel 255, then resizes them to the global image."""
        t, rows, cols = self.config.patch_size, plan.grid_h, plan.grid_w
        row = pipe.row_elems
        glob = flat[offset:offset + row].reshape(3, t, t)
        crops = flat[offset + row:offset + row * (1 + rows * cols)].reshape(rows * cols, 3, t, t)
        white = pipe.lut[:, 255].reshape(3, 1, 1)
        for r in range(rows):
            y0 = min(max(plan.resize_h - r * t, 0), t)
            for c in range(cols):
                x0 = min(max(plan.resize_w - c * t, 0), t)
                crop = crops[r * cols + c]
                if y0 < t:
                    crop[:, y0:, :] = white
                if x0 < t:
                    crop[:, :y0, x0:] = white
        _native.bicubic_float_tiles(crops, rows, cols, glob)

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major crops, each a channel-first (3, size, size) image

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        side = self.config.patch_size
        return (rows, 3, side, side)

    def pipeline(self, dtype: str) -> Any:
        """float32 only: the global image is resized from the float32 crops.

        Neither rescaled nor normalized (a rescale factor of 1 without normalization), transformers
        returns uint8, its global image rounded and clamped by torch's uint8 bicubic: refused."""
        if dtype != "float32":
            raise UnsupportedCallError(f"phi4_multimodal computes float32 (as transformers "
                                       f"returns it), not {dtype}")
        if self.config.rescale_factor == 1.0 and not self.config.do_normalize:
            raise UnsupportedCallError("phi4_multimodal with do_rescale=False and "
                                       "do_normalize=False (transformers returns uint8 crops and "
                                       "a uint8 global image, rounded and clamped by torch's "
                                       "bicubic), or with a rescale_factor of 1 and no "
                                       "normalization, is not computed by smg-fast")
        return super().pipeline(dtype)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        """<|image|> tokens per image for grid rows [1, resized height, resized width]."""
        return np.array([image_tokens(*self._masks(int(h), int(w))) for _, h, w in
                         grid.tolist()], np.int64)

    def _masks(self, new_h: int, new_w: int) -> tuple[np.ndarray, int, int]:
        """(masks, columns, rows) of an image resized to new_w x new_h.

        The grid is ceil(new / tile) on each side: the side the resize does not fill is padded
        by less than a tile (a grid one tile shorter would be strictly closer in aspect)."""
        t = self.config.patch_size
        cols, rows = -(-new_w // t), -(-new_h // t)
        return crop_masks(cols, rows, new_w, new_h, t), cols, rows

    def __call__(self, images: Any = None, return_tensors: str | None = "np",
                 dtype: Any = "float32", *, channels_first_wins: bool = False,
                 **options: Any) -> ProcessorOutput:
        """Processor.__call__ with transformers' outputs: see the module's docstring."""
        return Processor.__call__(self, images, return_tensors, dtype,
                                  channels_first_wins=channels_first_wins, **options)

    def _wrap(self, pixel_values: Any, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        t = self.config.patch_size
        masks = [self._masks(int(h), int(w))[0] for _, h, w in grid.tolist()]
        most = max(len(m) for m in masks)
        side = t // VISION_PATCH
        mask = np.ones((len(masks), most, side, side), np.float32)
        for i, m in enumerate(masks):
            mask[i, :len(m)] = m
        sizes = np.array([[-(-int(h) // t) * t, -(-int(w) // t) * t] for _, h, w in
                          grid.tolist()], np.int64).reshape(-1, 2)
        pixels = pixel_values.reshape(len(masks), most, 3, t, t)
        out = {"image_pixel_values": pixels, "image_sizes": sizes,
               "image_attention_mask": mask, "num_img_tokens": tokens,
               "pixel_values": pixel_values, "num_tokens": tokens}
        if return_tensors == "pt":
            import torch

            out = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}
        return ProcessorOutput(out)


def _call_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Phi-4's own options: patch_size (the mask's cell) must stay 14."""
    opts = dict(opts)
    if opts.get("patch_size") not in (None, VISION_PATCH):
        raise UnsupportedCallError(f"patch_size={opts['patch_size']!r}: smg-fast computes "
                                   f"phi4_multimodal's masks on {VISION_PATCH}-pixel patches")
    opts.pop("patch_size", None)
    return opts


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Phi-4-multimodal preprocessor_config.json: a square size, dynamic_hd."""
    out = gemma3.read_folder({k: v for k, v in pre.items() if k != "patch_size"})
    if pre.get("dynamic_hd") is not None:
        out["max_patches"] = pre["dynamic_hd"]
    if pre.get("patch_size") not in (None, VISION_PATCH):
        raise ValueError(f"patch_size must be {VISION_PATCH}, got {pre['patch_size']!r}")
    return out


def coerce(fields: dict[str, Any]) -> dict[str, Any]:
    """dynamic_hd as max_patches, an int (JSON and callers may give 36.0; not 2.5 or "36")."""
    out = dict(fields)
    if out.get("dynamic_hd") is not None:
        out["max_patches"] = out.pop("dynamic_hd")
    out.pop("dynamic_hd", None)
    if out.get("max_patches") is not None:
        out["max_patches"] = whole_field("dynamic_hd", out["max_patches"])
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the crops are whole 14-pixel patches and their count bounded."""
    gemma3.validate(cfg)
    if cfg.backend != TORCHVISION:
        raise ValueError("phi4_multimodal is transformers' torchvision class only: backend "
                         "'torchvision'")
    if cfg.patch_size % VISION_PATCH:
        raise ValueError(f"size must be a multiple of {VISION_PATCH}, got {cfg.patch_size}")
    if cfg.resample != 3:
        raise ValueError("resample must be 3 (BICUBIC): the global image's resize")
    if cfg.max_patches is None or not 1 <= cfg.max_patches <= MAX_TILES:
        raise ValueError(f"dynamic_hd must be 1..{MAX_TILES}, got {cfg.max_patches}")


def folder_backend(named: str) -> tuple[str | None, str]:
    """(backend, why) for a folder naming ``named``: the original checkpoints' remote class too."""
    if named.startswith("Phi4MM"):
        return TORCHVISION, (f"preprocessor_config.json names {named}, the original "
                             "checkpoints' remote code (not run or compared here): computed as "
                             "transformers' Phi4MultimodalImageProcessor")
    return auto_backend(named)


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Phi4MultimodalImageProcessor constructor arguments for cfg."""
    return {**gemma3._reference_kwargs(cfg), "dynamic_hd": cfg.max_patches,
            "do_normalize": cfg.do_normalize}


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Phi-4-multimodal attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, dynamic_hd=cfg.max_patches,
                patch_size=VISION_PATCH)


def _call_kwargs() -> type:
    """Phi-4's call options: ImagesKwargs with patch_size and dynamic_hd.

    transformers' own TypedDict lives in a module that imports torchvision; this one has its
    keys."""
    from transformers.processing_utils import ImagesKwargs

    class Phi4MultimodalImageProcessorKwargs(ImagesKwargs, total=False):  # type: ignore[misc, call-arg]
        patch_size: int
        dynamic_hd: int

    return Phi4MultimodalImageProcessorKwargs


def _read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments as preprocessor_config.json keys."""
    return dict(kwargs)


# microsoft/Phi-4-multimodal-instruct preprocessor_config.json (as transformers' class defaults
# give it; no hub access here): dynamic_hd 36, size 448x448, patch_size 14, resample 3
# (BICUBIC, the global image's), rescale 1/255, mean / std [0.5, 0.5, 0.5]; config.json
# model_type "phi4_multimodal" (the transformers-format revision) or "phi4mm" (the original
# remote-code one). Not in the engines: vLLM 0.33.0 and SGLang 0.5.23 serve phi4_multimodal
# text-only and phi4mm with the checkpoint's remote processor (docs/engines.md).
register(Family(
    "phi4_multimodal", Phi4MultimodalProcessor,
    ProcessorConfig("phi4_multimodal", 448, 1, 1, HALF, HALF, resample=3, backend=TORCHVISION,
                    max_patches=36),
    frozenset({"rescale_factor", "max_patches", "dynamic_hd"}), read_folder,
    CallRules({"dynamic_hd": "max_patches"}, gemma3._call_size, options=_call_options),
    folder_defaults={"patch_size": 448, "resample": 3, "image_mean": HALF, "image_std": HALF,
                     "rescale_factor": 1 / 255, "max_patches": 36},
    validate=validate, model_types=("phi4_multimodal", "phi4mm"), coerce=coerce,
    recognizes=names_class("Phi4MultimodalImageProcessor"),
    backends=(TORCHVISION,), folder_backend=folder_backend,
    reference=Reference({TORCHVISION: CLASS}, _reference_kwargs,
                        missing={"pil": "transformers has no PIL class for Phi-4-multimodal"}),
    dropin=DropIn({"Phi4MultimodalImageProcessor": TORCHVISION},
                  _attributes, _call_kwargs, lambda kwargs: "phi4_multimodal",
                  read_kwargs=_read_kwargs,
                  outputs=("image_pixel_values", "image_sizes", "image_attention_mask",
                           "num_img_tokens"), list_outputs=("num_img_tokens",),
                  in_engines=False)))

__all__ = ["Phi4MultimodalProcessor", "crop_geometry", "crop_masks", "image_tokens"]
