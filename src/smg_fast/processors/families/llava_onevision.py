"""LLaVA-OneVision: LLaVA-NeXT's tiling with 384-pixel tiles and 6 x 6 tiles of pinpoints.

transformers' LlavaOnevisionImageProcessorPil / LlavaOnevisionImageProcessor compute a single
image as LLaVA-NeXT's classes do (processors/families/llava_next.py), with a square size
{"height": 384, "width": 384} as the tile and no centre crop; outputs pixel_values, image_sizes
and batch_num_images (the images of each sample: 1 each for a flat list). The images of a
sample of several (a nested list with a longer sublist) are each padded to a square of the
processor's mean colour (int(mean * 255) per channel, the image centred) and resized to one
tile (processors/tiles.py's square_source). Tokens: LlavaOnevisionProcessor's count for the
published checkpoints (729 base features, the tiles' features pooled down past 9 tiles' worth:
anyres_max_9; 730 for an image of a multi-image sample). Registers the family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._dtypes import parse_dtype, to_torch
from ...errors import InvalidImageError, UnsupportedCallError
from ...imaging.media import ImageInput
from ..config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..plan import Plan, check_aspect
from ..processor import ProcessorOutput
from ..registry import Family, register
from . import llava_next
from .llava_next import LlavaNextProcessor, by_image, unpadded_features

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
        res_h, res_w = self.best_canvas(width, height)
        feats = int(math.sqrt(BASE_TOKENS))
        unpadded, newlines = unpadded_features(height, width, feats, res_h // side,
                                               res_w // side)
        cur_h, cur_w = newlines, unpadded // newlines  # the tiles' features, before pooling
        ratio = math.sqrt(cur_h * cur_w / (MAX_TILES_POOLED * feats**2))
        if ratio > 1.1:
            unpadded = int(cur_h // ratio) * int(cur_w // ratio)
            newlines = int(cur_h // ratio)
        return unpadded + newlines + BASE_TOKENS

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...] | None = None,
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """LlavaNextProcessor.__call__, adding batch_num_images.

        A nested list's samples of several images are computed as transformers does them: each
        image padded to a square of the processor's mean colour, then one tile."""
        counts = _images_per_sample(images)
        rt = getattr(return_tensors, "value", return_tensors)
        if counts is not None and any(n > 1 for n in counts):
            out = self._samples(images, counts, rt, dtype, channels_first_wins, options)
        else:
            out = super().__call__(images, rt, dtype, channels_first_wins=channels_first_wins,
                                   **options)
        nums = np.array(counts or [1] * len(out["image_sizes"]), np.int64)
        if rt == "pt":
            import torch

            out["batch_num_images"] = torch.from_numpy(nums)
        else:
            out["batch_num_images"] = nums
        return out

    def _squared(self) -> SquaredOnevisionProcessor:
        """The processor of this config's multi-image samples (made once, kept)."""
        with self._lock:
            proc = self.__dict__.get("_squared_proc")
            if proc is None:
                proc = self.__dict__["_squared_proc"] = SquaredOnevisionProcessor(self.config)
        return proc

    def _samples(self, images: Any, counts: list[int], rt: str | None, dtype: Any,
                 channels_first_wins: bool, options: dict[str, Any]) -> ProcessorOutput:
        """A call with multi-image samples: runs of tiled and of squared images, regrouped."""
        if options.get("encoding"):
            raise UnsupportedCallError("encoding='uint8+lut' is not computed for multi-image "
                                       "samples: request a float dtype without encoding")
        mean = options.get("image_mean")
        if mean is not None and tuple(float(m) for m in (
                [mean] * 3 if isinstance(mean, (int, float)) else mean)) != self.config.image_mean:
            raise UnsupportedCallError("a call's image_mean with multi-image samples (their "
                                       "padding is the processor's own mean colour) is not "
                                       "computed by smg-fast")
        if any(not 0 <= int(m * 255) <= 255 for m in self.config.image_mean):
            raise UnsupportedCallError("a mean colour outside 0..255 for multi-image samples is "
                                       "not computed by smg-fast")
        flat = [(im, n > 1) for sample, n in zip((x for x in images if x), counts, strict=True)
                for im in sample]
        squared = self._squared()
        tiles, sizes, tokens, per_image = [], [], [], []
        start = 0
        while start < len(flat):
            stop = start + 1
            while stop < len(flat) and flat[stop][1] == flat[start][1]:
                stop += 1
            proc = squared if flat[start][1] else self
            out = LlavaNextProcessor.__call__(proc, [im for im, _ in flat[start:stop]], "np",
                                              dtype, channels_first_wins=channels_first_wins,
                                              **options)
            for i, (h, w) in enumerate(out["image_sizes"]):
                n = proc.plan(int(w), int(h)).rows
                tiles.append(out["pixel_values"][i, :n])
                per_image.append(n)
            sizes.append(out["image_sizes"])
            tokens.append(out["num_tokens"])
            start = stop
        side = self.config.patch_size
        pixel_values = by_image(np.concatenate(tiles), per_image, side)
        result = ProcessorOutput(pixel_values=pixel_values, num_tokens=np.concatenate(tokens),
                                 image_sizes=np.concatenate(sizes))
        if rt == "pt":
            import torch

            result = ProcessorOutput(
                pixel_values=to_torch(pixel_values, parse_dtype(dtype)),
                num_tokens=torch.from_numpy(result["num_tokens"]),
                image_sizes=torch.from_numpy(result["image_sizes"]))
        return result


class SquaredOnevisionProcessor(LlavaOnevisionProcessor):
    """OneVision's images in multi-image samples: padded to a square of the mean colour, one tile.

    The square (as long as the image's longer side, the image centred, the odd padding pixel
    after) is resized to the tile; 730 tokens (729 features and a newline)."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        """The square's resize to one tile.

        InvalidImageError when the square (the longer side squared) passes the processor's
        max_image_pixels, before it is allocated."""
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        longer = max(width, height)
        if self.config.max_image_pixels is not None and \
                longer * longer > self.config.max_image_pixels:
            raise InvalidImageError(index, f"a {width}x{height} image's {longer}x{longer} square "
                                           f"(a multi-image sample's padding) passes the limit "
                                           f"of {self.config.max_image_pixels} pixels")
        side = self.config.patch_size
        fill = (int(self.config.image_mean[0] * 255), int(self.config.image_mean[1] * 255),
                int(self.config.image_mean[2] * 255))
        return Plan(side, side, 1, 1, fill=fill, grid_thw=(1, height, width))

    def image_tokens(self, height: int, width: int) -> int:
        return BASE_TOKENS + 1


def _images_per_sample(images: Any) -> list[int] | None:
    """Images per sample of a nested list (empty samples dropped), as transformers reads it.

    None for a flat input."""
    if not isinstance(images, (list, tuple)) or not images or \
            not isinstance(images[0], (list, tuple)):
        return None
    return [len(x) for x in images if x]


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
                  # in_engines: tests/engines/test_engine_vllm_tiles.py (SGLang has no
                  # LLaVA-OneVision model for the -hf checkpoints)
                  outputs=("pixel_values", "image_sizes", "batch_num_images"), in_engines=True,
                  lists_when_untyped=True,
                  list_outputs=("image_sizes", "batch_num_images"))))

__all__ = ["PINPOINTS", "LlavaOnevisionProcessor"]
