"""Gemma 4: an aspect-preserving resize under a soft-token budget, channel-last patches.

Each image is resized (BICUBIC: Pillow's for the PIL backend, torch's uint8 antialiased one for
torchvision; not at all when it already has the target size) to the largest size whose sides are
multiples of patch_size * pooling_kernel_size (48 published) and which holds at most max_patches
= max_soft_tokens * pooling_kernel_size^2 patches (280 * 9 published); rescaled by 1/255 and not
normalized; cut into patch_size patches in raster order, each patch's pixels channel-last
(native ``PatchOrder.CHANNELS_LAST``), then padded with zero rows to max_patches:
pixel_values [N, max_patches, 3 * patch_size^2]. image_position_ids [N, max_patches, 2] holds
each patch's (column, row), -1 for padding; num_soft_tokens_per_image the patches over
pooling_kernel_size^2, the tokens the image becomes in the prompt (between its begin and end
tokens). Pooling kernel side is the config's merge_size. Registers the family: transformers'
Gemma4ImageProcessorPil / Gemma4ImageProcessor are its reference."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _native
from ...errors import InvalidImageError
from ..config import ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register

SOFT_TOKEN_BUDGETS = (70, 140, 280, 560, 1120)  # the max_soft_tokens transformers accepts
_ZERO, _ONE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)


def budget_size(height: int, width: int, patch: int, max_patches: int,
                pooling: int) -> tuple[int, int]:
    """(height, width) Gemma 4 resizes to; ValueError where transformers' rule raises.

    The image scaled to max_patches patches of patch x patch pixels, each side floored to a
    multiple of patch * pooling; a side that floors to 0 becomes one multiple, and the other
    the aspect (floored) times it, at most (max_patches / pooling^2) multiples."""
    budget = max_patches * patch * patch
    scale = math.sqrt(budget / (height * width))
    step = pooling * patch
    h = int(math.floor(scale * height / step)) * step
    w = int(math.floor(scale * width / step)) * step
    if h == 0 and w == 0:
        raise ValueError(f"{width}x{height} resizes to 0x0 (sides are multiples of {step})")
    longest = (max_patches // pooling**2) * step
    if h == 0:
        h, w = step, min(int(math.floor(width / height)) * step, longest)
    elif w == 0:
        h, w = min(int(math.floor(height / width)) * step, longest), step
    if h * w > budget:
        raise ValueError(f"{width}x{height} resizes to {w}x{h}, over {max_patches} patches")
    return h, w


class Gemma4Processor(Processor):
    """Gemma 4's budgeted resize and channel-last patches padded to max_patches per image."""

    patch_order = _native.PatchOrder.CHANNELS_LAST
    zero_rows = True

    @property
    def max_patches(self) -> int:
        """Patch rows per image: max_soft_tokens * pooling_kernel_size^2."""
        cfg = self.config
        assert cfg.max_soft_tokens is not None  # validate() requires it
        return cfg.max_soft_tokens * cfg.merge_size**2

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        try:
            h, w = budget_size(height, width, cfg.patch_size, self.max_patches, cfg.merge_size)
        except ValueError as exc:
            raise InvalidImageError(index, str(exc)) from None
        if h < 1 or w < 1:  # a side floored to 0 whose aspect floors to 0 too
            raise InvalidImageError(index, f"{width}x{height} resizes to an empty grid ({w}x{h})")
        gh, gw = h // cfg.patch_size, w // cfg.patch_size
        return Plan(resize_w=w, resize_h=h, grid_h=gh, grid_w=gw,
                    pad_rows=self.max_patches - gh * gw)

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # raster order; the pooling kernel is the model's, not the layout's

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows // self.max_patches, self.max_patches, 3 * p * p)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        # the call's own budget and pooling (a variant's), as its output and tokens hold them
        positions = position_ids(grid, pixel_values.shape[1])
        soft = tokens
        if return_tensors == "pt":
            import torch

            out["image_position_ids"] = torch.from_numpy(positions)
            out["num_soft_tokens_per_image"] = torch.from_numpy(soft)
        else:
            out["image_position_ids"], out["num_soft_tokens_per_image"] = positions, soft
        del out["image_grid_thw"]  # not Gemma's: image_position_ids hold the grid
        return out


def position_ids(grid: np.ndarray, rows: int) -> np.ndarray:
    """[N, rows, 2] int64: each patch's (column, row) in raster order, then -1 for padding."""
    out = np.full((len(grid), rows, 2), -1, dtype=np.int64)
    for i, (_, gh, gw) in enumerate(grid.tolist()):
        n = gh * gw
        out[i, :n, 0] = np.tile(np.arange(gw), gh)
        out[i, :n, 1] = np.repeat(np.arange(gh), gw)
    return out


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Gemma 4 preprocessor_config.json (budget, patch, pooling, rescale...)."""
    out: dict[str, Any] = {}
    for key, field in (("patch_size", "patch_size"), ("max_soft_tokens", "max_soft_tokens"),
                       ("pooling_kernel_size", "merge_size"), ("image_mean", "image_mean"),
                       ("image_std", "image_std"), ("rescale_factor", "rescale_factor"),
                       ("resample", "resample")):
        if pre.get(key) is not None:
            out[field] = pre[key]
    if pre.get("do_normalize") is True:
        out["do_normalize"] = True
    return {**out, **flag_fields(pre)}


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the budget is one transformers accepts and the layout is Gemma 4's."""
    if cfg.max_soft_tokens not in SOFT_TOKEN_BUDGETS:
        raise ValueError(f"max_soft_tokens must be one of {SOFT_TOKEN_BUDGETS}, "
                         f"got {cfg.max_soft_tokens}")
    if cfg.temporal_patch_size != 1:
        raise ValueError("gemma4 takes temporal_patch_size 1")


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' Gemma 4 classes ignore size: the budget decides."""
    return {}


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Gemma 4 constructor arguments for cfg."""
    return dict(patch_size=cfg.patch_size, max_soft_tokens=cfg.max_soft_tokens,
                pooling_kernel_size=cfg.merge_size, image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample, do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Gemma 4 attributes transformers' class holds."""
    return dict(max_soft_tokens=cfg.max_soft_tokens, pooling_kernel_size=cfg.merge_size,
                size=None)


def _call_kwargs() -> type:
    """Gemma 4's call options as a TypedDict of transformers' ImagesKwargs (its PIL module)."""
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorKwargs

    return Gemma4ImageProcessorKwargs


_HF = "transformers.models.gemma4.image_processing"
# transformers' Gemma4ImageProcessor class defaults, which the published google/gemma-4
# checkpoints' processor configs hold: patch 16, pooling 3, 280 soft tokens, BICUBIC, rescale
# 1/255, do_normalize false (mean 0, std 1).
register(Family(
    "gemma4", Gemma4Processor,
    ProcessorConfig("gemma4", 16, 3, 1, _ZERO, _ONE, resample=3, max_soft_tokens=280,
                    do_normalize=False),
    frozenset({"rescale_factor", "max_soft_tokens"}), read_folder,
    CallRules({"patch_size": "patch_size", "max_soft_tokens": "max_soft_tokens",
               "pooling_kernel_size": "merge_size"}, _call_size),
    folder_defaults={"patch_size": 16, "merge_size": 3, "max_soft_tokens": 280, "resample": 3,
                     "image_mean": _ZERO, "image_std": _ONE, "rescale_factor": 1 / 255,
                     "do_normalize": False},
    validate=validate, model_types=("gemma4",),
    recognizes=lambda pre: str(pre.get("image_processor_type", "")).startswith(
        "Gemma4ImageProcessor"),
    reference=Reference({"pil": f"{_HF}_pil_gemma4:Gemma4ImageProcessorPil",
                         "torchvision": f"{_HF}_gemma4:Gemma4ImageProcessor"},
                        _reference_kwargs),
    dropin=DropIn({"Gemma4ImageProcessor": "torchvision", "Gemma4ImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "gemma4",
                  outputs=("pixel_values", "image_position_ids", "num_soft_tokens_per_image"),
                  in_engines=True, pil_keeps_uint8=True,
                  list_outputs=("num_soft_tokens_per_image",))))

__all__ = ["SOFT_TOKEN_BUDGETS", "Gemma4Processor", "budget_size", "position_ids"]
