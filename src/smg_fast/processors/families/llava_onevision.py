"""LLaVA-OneVision: LLaVA-NeXT's tiling with 384-pixel tiles and 6 x 6 tiles of pinpoints.

transformers' LlavaOnevisionImageProcessorPil / LlavaOnevisionImageProcessor compute a single
image as LLaVA-NeXT's classes do (processors/families/llava_next.py), with a square size
{"height": 384, "width": 384} as the tile and no centre crop; outputs pixel_values, image_sizes
and batch_num_images (the images of each sample: 1 each for a flat list). A sample of several
images (a nested list with a longer sublist) is padded to a square of the mean colour and
resized whole in transformers: smg-fast refuses it (UnsupportedCallError; the drop-in hands it
to transformers). Tokens: LlavaOnevisionProcessor's count for the published checkpoints (729
base features, the tiles' features pooled down past 9 tiles' worth: anyres_max_9). Registers
the family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import UnsupportedCallError
from ...imaging.media import ImageInput
from ..config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..processor import ProcessorOutput
from ..registry import Family, register
from ..tiles import best_resolution
from . import llava_next
from .llava_next import LlavaNextProcessor, unpadded_features

# llava-hf/llava-onevision-qwen2-*-ov-hf image_grid_pinpoints (transformers' class default
# too): every (height, width) of 1..6 tiles of 384 pixels a side
PINPOINTS = tuple((384 * r, 384 * c) for r in range(1, 7) for c in range(1, 7))
BASE_TOKENS = 729  # LlavaOnevisionProcessor's num_image_tokens: (384 // 14)^2 SigLIP features
MAX_TILES_POOLED = 9  # vision_aspect_ratio "anyres_max_9"


class LlavaOnevisionProcessor(LlavaNextProcessor):
    """LLaVA-NeXT's tiling for single images; batch_num_images as OneVision returns it."""

    crops = False  # no crop_size: size alone is the tile

    def image_tokens(self, height: int, width: int) -> int:
        side = self.config.patch_size
        res_h, res_w = best_resolution(width, height, self.config.image_grid_pinpoints
                                       or PINPOINTS)
        feats = int(math.sqrt(BASE_TOKENS))
        unpadded, newlines = unpadded_features(height, width, feats, res_h // side,
                                               res_w // side)
        cur_h, cur_w = newlines, unpadded // newlines  # the tiles' features, before pooling
        ratio = math.sqrt(cur_h * cur_w / (MAX_TILES_POOLED * feats**2))
        if ratio > 1.1:
            unpadded = int(cur_h // ratio) * int(cur_w // ratio)
            newlines = int(cur_h // ratio)
        return unpadded + newlines + BASE_TOKENS

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...] = None,
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """LlavaNextProcessor.__call__, adding batch_num_images; refuses multi-image samples."""
        counts = _images_per_sample(images)
        out = super().__call__(images, return_tensors, dtype,
                               channels_first_wins=channels_first_wins, **options)
        nums = np.array(counts or [1] * len(out["image_sizes"]), np.int64)
        if getattr(return_tensors, "value", return_tensors) == "pt":
            import torch

            out["batch_num_images"] = torch.from_numpy(nums)
        else:
            out["batch_num_images"] = nums
        return out


def _images_per_sample(images: Any) -> list[int] | None:
    """Images per sample of a nested list (empty samples dropped), as transformers reads it.

    None for a flat input; UnsupportedCallError when a sample holds several images."""
    if not isinstance(images, (list, tuple)) or not images or \
            not isinstance(images[0], (list, tuple)):
        return None
    counts = [len(x) for x in images if x]
    if any(n > 1 for n in counts):
        raise UnsupportedCallError("a sample of several images (OneVision pads each to a square "
                                   "of the mean colour) is not computed by smg-fast")
    return counts


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' LlavaOnevision constructor arguments for cfg."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side},
                image_grid_pinpoints=[list(p) for p in cfg.image_grid_pinpoints],
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std),
                rescale_factor=cfg.rescale_factor, resample=cfg.resample,
                do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The LlavaOnevision attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, crop_size=None, do_center_crop=None,
                image_grid_pinpoints=[list(p) for p in cfg.image_grid_pinpoints], do_pad=True)


def _call_kwargs() -> type:
    """LlavaOnevision's call options (transformers' TypedDict, from its PIL module)."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorKwargs,
    )

    return LlavaOnevisionImageProcessorKwargs


# llava-hf/llava-onevision-qwen2-7b-ov-hf preprocessor_config.json (as transformers' docs and
# tests give it; no hub access here): LlavaOnevisionImageProcessor, size {"height": 384,
# "width": 384}, image_grid_pinpoints PINPOINTS, resample 3 (BICUBIC), rescale 1/255,
# image_mean / image_std [0.5, 0.5, 0.5] (SigLIP's), do_pad, do_convert_rgb true; config.json
# model_type "llava_onevision".
register(Family(
    "llava_onevision", LlavaOnevisionProcessor,
    ProcessorConfig("llava_onevision", 384, 1, 1, HALF, HALF, resample=3,
                    image_grid_pinpoints=PINPOINTS),
    frozenset({"rescale_factor", "image_grid_pinpoints"}), llava_next.read_folder,
    CallRules({}),
    # transformers' class defaults, for what a folder lacks: 384 square, the 384-pixel
    # pinpoints, BICUBIC, OpenAI CLIP mean / std
    folder_defaults={"patch_size": 384, "image_grid_pinpoints": PINPOINTS, "resample": 3,
                     "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
                     "rescale_factor": 1 / 255},
    validate=llava_next.validate, model_types=("llava_onevision",), coerce=llava_next.coerce,
    recognizes=names_class("LlavaOnevisionImageProcessor"),
    reference=Reference(transformers_classes("llava_onevision", "LlavaOnevisionImageProcessor"),
                        _reference_kwargs),
    dropin=DropIn({"LlavaOnevisionImageProcessor": "torchvision",
                   "LlavaOnevisionImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "llava_onevision",
                  llava_next.read_kwargs,
                  outputs=("pixel_values", "image_sizes", "batch_num_images"), in_engines=False,
                  lists_when_untyped=True,
                  list_outputs=("image_sizes", "batch_num_images"))))

__all__ = ["PINPOINTS", "LlavaOnevisionProcessor"]
