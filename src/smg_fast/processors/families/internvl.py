"""InternVL 2.5 / 3 / 3.5 (the ``-hf`` checkpoints): square tiles on a closest-ratio grid.

transformers' GotOcr2ImageProcessorPil / GotOcr2ImageProcessor with ``crop_to_patches``: each
image is resized (BICUBIC: Pillow's, or torch's uint8 antialiased one) onto the grid of
size x size tiles whose aspect ratio is closest to its own, among min_patches..max_patches tiles
(processors/tiles.py), and cut into those tiles row by row; with more than one tile the whole
image resized to one tile follows as a thumbnail. Without ``crop_to_patches`` (or with
max_patches <= 1) an image is one tile. Rescale and normalize as transformers' classes do:
pixel_values [sum of tiles, 3, size, size] and num_patches (the tiles per image). Each tile is
256 tokens in the prompt (InternVLProcessor's image_seq_length). Registers the family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import UnsupportedCallError
from ..batch import PlannedBatch
from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig, whole_field
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from ..tiles import MAX_TILES, candidates, set_order_candidates, tiled_plan
from . import gemma3

TOKENS_PER_TILE = 256  # InternVLProcessor's image_seq_length: (448 / 14)^2 tokens, pooled 2x2
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_TILING = ("crop_to_patches", "min_patches", "max_patches")
UPSTREAM = "upstream"  # vLLM's own InternVL processor, for the original (non -hf) checkpoints


class InternVLProcessor(Processor):
    """GotOcr2's tiling: each image's tiles, then its thumbnail, each (3, size, size)."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        tile = cfg.patch_size
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        if not cfg.crop_to_patches:
            return Plan(tile, tile, 1, 1)
        order = set_order_candidates if cfg.backend == UPSTREAM else candidates
        return tiled_plan(width, height, tile, order(int(cfg.min_patches or 0),
                                                     int(cfg.max_patches or 0)))

    def plan_batch(self, images: Any, dtype: Any = "float32") -> PlannedBatch:
        """Processor.plan_batch; with vLLM's numerics, inputs with transparency are refused.

        vLLM's loader blends them onto white by Pillow's paste with the alpha mask, which
        rounds otherwise than transformers' alpha compositing that smg-fast reproduces."""
        planned = super().plan_batch(images, dtype)
        if self.config.backend == UPSTREAM:
            for h in planned._headers:
                if h.transparent:
                    planned.close()
                    raise UnsupportedCallError(
                        f"image {h.index} has transparency: vLLM's own InternVL path blends it "
                        f"with Pillow's paste, which smg-fast does not reproduce; give RGB")
        return planned

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major tiles, each a channel-first (3, size, size) image

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        side = self.config.patch_size
        return (rows, 3, side, side)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        return num_patches(grid) * TOKENS_PER_TILE

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        patches = num_patches(grid)
        if return_tensors == "pt":
            import torch

            out["num_patches"] = torch.from_numpy(patches)
        else:
            out["num_patches"] = patches
        del out["image_grid_thw"]  # not InternVL's: num_patches says how the tiles divide
        return out


def num_patches(grid: np.ndarray) -> np.ndarray:
    """Tiles per image for (n, 3) grid rows [1, rows, columns]: the grid, and a thumbnail."""
    cells = grid[:, 1] * grid[:, 2]
    return (cells + (cells > 1)).astype(np.int64)


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a GotOcr2 preprocessor_config.json: Gemma 3's square size keys, tiling."""
    out = gemma3.read_folder(pre)
    for key in _TILING:
        if pre.get(key) is not None:
            out[key] = pre[key]
    return out


def coerce(fields: dict[str, Any]) -> dict[str, Any]:
    """The tiling fields in the config's types (JSON and callers may give other numbers)."""
    out = dict(fields)
    for key in ("min_patches", "max_patches"):
        if out.get(key) is not None:
            out[key] = whole_field(key, out[key])
    if out.get("crop_to_patches") is not None:
        out["crop_to_patches"] = bool(out["crop_to_patches"])
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the layout is whole tiles and the tile counts are bounded."""
    gemma3.validate(cfg)
    if cfg.crop_to_patches is None or cfg.min_patches is None or cfg.max_patches is None:
        raise ValueError("internvl needs crop_to_patches, min_patches and max_patches")
    if cfg.max_patches > MAX_TILES:
        raise ValueError(f"max_patches must be at most {MAX_TILES}, got {cfg.max_patches}")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' GotOcr2 constructor arguments for cfg."""
    return {**gemma3._reference_kwargs(cfg), **{k: getattr(cfg, k) for k in _TILING}}


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The GotOcr2 attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side},
                **{k: getattr(cfg, k) for k in _TILING})


def _call_kwargs() -> type:
    """GotOcr2's call options as a TypedDict of transformers' ImagesKwargs (its PIL module)."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (
        GotOcr2ImageProcessorKwargs,
    )

    return GotOcr2ImageProcessorKwargs


def _count_patches(dropin: Any, height: int, width: int, kwargs: dict[str, Any]) -> int:
    """get_number_of_image_patches: tiles (with the thumbnail) for a height x width image."""
    size = kwargs.get("patch_size", dropin.size)
    side = size["height"] if isinstance(size, dict) else size.height
    crop = kwargs.get("crop_to_patches", dropin.crop_to_patches)
    most = kwargs.get("max_patches", dropin.max_patches)
    if not crop or most <= 1:
        return 1
    plan = tiled_plan(width, height, side,
                      candidates(kwargs.get("min_patches", dropin.min_patches), most))
    return plan.cells


# OpenGVLab/InternVL3-1B-hf (and the other InternVL 2.5 / 3 / 3.5 -hf checkpoints)
# preprocessor_config.json: GotOcr2ImageProcessorFast, size 448x448, crop_to_patches true,
# min_patches 1, max_patches 12, resample 3 (BICUBIC), rescale 1/255, ImageNet mean / std
# ([0.485, 0.456, 0.406] / [0.229, 0.224, 0.225]); InternVLProcessor also passes
# crop_to_patches=True on every call.
register(Family(
    "internvl", InternVLProcessor,
    ProcessorConfig("internvl", 448, 1, 1, IMAGENET_MEAN, IMAGENET_STD, resample=3,
                    crop_to_patches=True, min_patches=1, max_patches=12),
    frozenset({"rescale_factor", *_TILING}), read_folder,
    CallRules({"min_patches": "min_patches", "max_patches": "max_patches",
               "crop_to_patches": "crop_to_patches"}, gemma3._call_size),
    # transformers' GotOcr2 class defaults, for what a folder lacks: size 384, BICUBIC, CLIP
    # mean / std, rescale 1/255, crop_to_patches off, 1..12 tiles
    folder_defaults={"patch_size": 384, "resample": 3, "image_mean": OPENAI_CLIP_MEAN,
                     "image_std": OPENAI_CLIP_STD, "rescale_factor": 1 / 255,
                     "crop_to_patches": False, "min_patches": 1, "max_patches": 12},
    validate=validate, model_types=("internvl",), coerce=coerce,
    recognizes=names_class("GotOcr2ImageProcessor"),
    backends=("pil", "torchvision", UPSTREAM),
    reference=Reference(transformers_classes("got_ocr2", "GotOcr2ImageProcessor"),
                        _reference_kwargs,
                        missing={UPSTREAM: "vLLM's own InternVL processor "
                                           "(vllm/transformers_utils/processors/internvl.py) is "
                                           "not in transformers"}),
    dropin=DropIn({"GotOcr2ImageProcessor": "torchvision", "GotOcr2ImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "internvl",
                  # in_engines: tests/engines/test_engine_vllm_tiles.py (SGLang computes
                  # InternVL with its own code and has no model for the -hf checkpoints)
                  outputs=("pixel_values", "num_patches"), in_engines=True,
                  lists_when_untyped=True,
                  count_patches=_count_patches)))

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "TOKENS_PER_TILE", "InternVLProcessor",
           "num_patches"]
