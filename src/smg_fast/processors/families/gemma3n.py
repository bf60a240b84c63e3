"""Gemma 3n: SigLIP's fixed-size resize to whole channel-first images, rescaled only.

Gemma 3n's checkpoints name transformers' SiglipImageProcessor(Fast): each image resized to
size x size (768 published; no aspect preservation) with BILINEAR (Pillow's for the PIL
backend, torch's uint8 antialiased one for torchvision), rescaled by 1/255 and, as the published
config says do_normalize false, not normalized (its mean / std 0.5 are kept and unused):
pixel_values [N, 3, size, size], 256 tokens per image in the prompt (Gemma3nProcessor's
image_seq_length). Gemma 3's processor without pan-and-scan and num_crops. Registers the family:
transformers' SiglipImageProcessorPil / SiglipImageProcessor are its reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...imaging.media import ImageInput
from ..config import HALF, ProcessorConfig
from ..hooks import CallRules, DropIn, Reference
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from .gemma3 import Gemma3Processor, _call_size, read_folder, validate


class Gemma3nProcessor(Gemma3Processor):
    """SigLIP's fixed square resize; each image one channel-first (3, size, size) output."""

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """Processor.__call__ (SigLIP has no pan-and-scan)."""
        return Processor.__call__(self, images, return_tensors, dtype,
                                  channels_first_wins=channels_first_wins, **options)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str,
              crops: list[int] | None = None) -> ProcessorOutput:
        out = Processor._wrap(self, pixel_values, grid, tokens, return_tensors, dtype_name)
        del out["image_grid_thw"]  # every image is one (3, size, size) tensor
        return out


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' SigLIP constructor arguments for cfg."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample, do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The SigLIP attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side})


def _call_kwargs() -> type:
    """SigLIP's call options: transformers' plain ImagesKwargs."""
    from transformers.processing_utils import ImagesKwargs

    return ImagesKwargs


_HF = "transformers.models.siglip.image_processing"
# Published google/gemma-3n-E4B-it (and E2B) preprocessor_config.json: SiglipImageProcessorFast,
# size 768x768, resample 2 (BILINEAR), rescale 1/255, do_normalize false (mean = std = 0.5 kept).
register(Family(
    "gemma3n", Gemma3nProcessor,
    ProcessorConfig("gemma3n", 768, 1, 1, HALF, HALF, resample=2, do_normalize=False),
    frozenset({"rescale_factor"}), read_folder, CallRules({}, _call_size),
    # transformers' SiglipImageProcessor class defaults, for what a folder lacks: 224x224,
    # BICUBIC, mean = std = 0.5 (ImageNet-standard), rescale 1/255, normalized
    folder_defaults={"patch_size": 224, "resample": 3, "image_mean": HALF, "image_std": HALF,
                     "rescale_factor": 1 / 255, "do_normalize": True},
    validate=validate, model_types=("gemma3n",),
    recognizes=lambda pre: str(pre.get("image_processor_type", "")).startswith(
        "SiglipImageProcessor"),
    reference=Reference({"pil": f"{_HF}_pil_siglip:SiglipImageProcessorPil",
                         "torchvision": f"{_HF}_siglip:SiglipImageProcessor"},
                        _reference_kwargs),
    dropin=DropIn({"SiglipImageProcessor": "torchvision", "SiglipImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "gemma3n",
                  outputs=("pixel_values",), in_engines=True, pil_keeps_uint8=True,
                  lists_when_untyped=True)))

__all__ = ["Gemma3nProcessor"]
