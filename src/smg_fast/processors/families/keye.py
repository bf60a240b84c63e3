"""Keye-VL (Kwai-Keye/Keye-VL-8B-Preview): its remote-code processor, PaddleOCR-VL's computation.

Keye's ``image_processing_keye.SiglipImageProcessor`` (remote code, named by the folder's
auto_map) is what PaddleOCR-VL's processor was derived from, and computes the same: a side under
patch * merge raised to it, then Qwen's smart_resize (vLLM's keye.py counts placeholders with
that rule); transformers' convert_to_rgb; Pillow's BICUBIC; ``f32(u * rescale)``, then
``-= f32(mean)`` and ``/= f32(std)`` in float32; raster patches [N, 3, 14, 14] with temporal 1;
``image_grid_thw``. So the family is PaddleOCRVLProcessor with Keye's numbers, on the PIL backend
(the remote code has no torchvision path), with transformers' PaddleOCRVLImageProcessorPil as its
reference. A call's ``size`` / pixel range is refused: the remote class ignores them. Registers
the family."""

from __future__ import annotations

from typing import Any

from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules, Reference
from ..registry import Family, register
from .paddleocr_vl import PADDLE, PaddleOCRVLProcessor

# The remote class's constructor defaults (what a folder lacks takes these): 28*28*130 ..
# 28*28*1280 pixels, patch 14, merge 2, temporal 1, CLIP mean / std, BICUBIC.
CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 1, "merge_size": 2, "min_pixels": 28 * 28 * 130,
    "max_pixels": 28 * 28 * 1280, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}


def _recognizes(pre: dict[str, Any]) -> bool:
    """A preprocessor_config.json whose auto_map names Keye's remote image processor."""
    auto = pre.get("auto_map") or {}
    return str(auto.get("AutoImageProcessor", "")).startswith("image_processing_keye.")


_PIL_CLASS = ("transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl:"
              "PaddleOCRVLImageProcessorPil")

register(Family(
    "keye", PaddleOCRVLProcessor,
    ProcessorConfig("keye", 14, 2, 1, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, min_pixels=28 * 28 * 130,
                    max_pixels=28 * 28 * 1280),
    PADDLE.options, PADDLE.read_folder, CallRules({}), CLASS_DEFAULTS, PADDLE.validate,
    model_types=("Keye", "keye"), recognizes=_recognizes, unambiguous=True, backends=("pil",),
    folder_backend=lambda named: ("pil", "Keye's remote code computes with Pillow and NumPy"),
    reference=Reference({"pil": _PIL_CLASS}, PADDLE.reference.kwargs)))  # type: ignore[union-attr]
