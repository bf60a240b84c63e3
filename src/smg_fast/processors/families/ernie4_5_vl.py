"""ERNIE-4.5-VL: Qwen's smart_resize and merge-ordered patches, temporal patch 1.

transformers' Ernie4_5_VLMoeImageProcessorPil / Ernie4_5_VLMoeImageProcessor compute as
Qwen2-VL's classes with a temporal patch of 1 (rows of 3 * P * P) and their own pixel range;
their call options are ``size`` and the patch, merge and temporal sizes (no min_pixels /
max_pixels). Registers the family."""

from __future__ import annotations

from typing import Any

from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules
from ..registry import register
from .qwen import QwenVLProcessor, _call_size, read_folder, smart_resize
from .qwen_like import qwen_like_family

# transformers' Ernie4_5_VLMoeImageProcessorPil class attributes, which are also the published
# ERNIE-4.5-VL configs' values: size 56*56 .. 28*28*6177 pixels, patch 14, merge 2, CLIP mean/std.
HF_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 1, "merge_size": 2, "min_pixels": 56 * 56,
    "max_pixels": 28 * 28 * 6177, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}



def _read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """Qwen's reading of a preprocessor_config.json, the budget from ``size`` alone.

    transformers' ERNIE classes keep a top-level min_pixels / max_pixels as a plain attribute
    that changes nothing."""
    return read_folder({k: v for k, v in pre.items() if k not in ("min_pixels", "max_pixels")})


_HF = "transformers.models.ernie4_5_vl_moe.image_processing"
ERNIE = register(qwen_like_family(
    "ernie4_5_vl_moe", QwenVLProcessor,
    ProcessorConfig("ernie4_5_vl_moe", 14, 2, 1, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                    min_pixels=56 * 56, max_pixels=28 * 28 * 6177),
    HF_CLASS_DEFAULTS, smart_resize,
    {"pil": f"{_HF}_pil_ernie4_5_vl_moe:Ernie4_5_VLMoeImageProcessorPil",
     "torchvision": f"{_HF}_ernie4_5_vl_moe:Ernie4_5_VLMoeImageProcessor"},
    "Ernie4_5_VLMoeImageProcessor",
    f"{_HF}_pil_ernie4_5_vl_moe:Ernie4_5_VLMoeImageProcessorKwargs",
    calls=CallRules({k: k for k in ("patch_size", "merge_size", "temporal_patch_size")},
                    _call_size), read=_read_folder))

__all__: list[str] = []
