"""PaddleOCR-VL: Qwen's smart_resize after a short-side upscale, raster patches [N, 3, P, P].

transformers' PaddleOCRVLImageProcessorPil / PaddleOCRVLImageProcessor: a side shorter than
patch * merge is first scaled up to it (the other side scaled alike, Python round), then Qwen's
smart_resize with PaddleOCR-VL's min/max pixels; BICUBIC; rescale and normalize as Qwen; patches
in row-major (raster) order without merge windows and with the temporal copy (1 in the hub
config), shaped [N, 3 * T, P, P]; image_grid_thw as Qwen's. Registers the family."""

from __future__ import annotations

import math
from typing import Any

from ...errors import InvalidImageError
from ..config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..plan import Plan, check_aspect
from ..registry import register
from .qwen import QwenVLProcessor, smart_resize
from .qwen_like import qwen_like_family


def upscale_short_side(height: int, width: int, factor: int) -> tuple[int, int]:
    """(height, width) with a side below factor raised to it, the other side scaled alike.

    Height first, then width, each with Python's round of the float ratio, as transformers."""
    if height < factor:
        width, height = round(width * factor / height), factor
    if width < factor:
        height, width = round(height * factor / width), factor
    return height, width


def paddle_smart_resize(height: int, width: int, factor: int, min_pixels: int,
                        max_pixels: int) -> tuple[int, int]:
    """PaddleOCR-VL's resize target: upscale_short_side, then Qwen's smart_resize."""
    height, width = upscale_short_side(height, width, factor)
    return smart_resize(height, width, factor, min_pixels, max_pixels)


class PaddleOCRVLProcessor(QwenVLProcessor):
    """PaddleOCR-VL's resize and raster patches [N, 3 * T, P, P]."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check first
        factor = cfg.patch_size * cfg.merge_size
        up_h, up_w = upscale_short_side(height, width, factor)
        check_aspect(index, up_w, up_h)  # transformers checks the upscaled sides
        h, w = smart_resize(up_h, up_w, factor, cfg.min_pixels, cfg.max_pixels)
        if h < factor or w < factor:
            raise InvalidImageError(index, f"{width}x{height} resizes to an empty grid ({w}x{h})")
        return Plan(resize_w=w, resize_h=h, grid_h=h // cfg.patch_size, grid_w=w // cfg.patch_size)

    def _layout(self) -> tuple[int, int]:
        return 1, self.config.temporal_patch_size  # raster order, the temporal copy

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows, 3 * self.config.temporal_patch_size, p, p)


# transformers' PaddleOCRVLImageProcessorPil class attributes (what a folder lacks takes these).
HF_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 1, "merge_size": 2, "min_pixels": 384 * 384,
    "max_pixels": 1536 * 1536, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}

_HF = "transformers.models.paddleocr_vl.image_processing"
# PaddlePaddle/PaddleOCR-VL's preprocessor_config.json: min_pixels 147384, max_pixels 2822400,
# patch 14, merge 2, temporal 1, mean/std 0.5, BICUBIC.
PADDLE = register(qwen_like_family(
    "paddleocr_vl", PaddleOCRVLProcessor,
    ProcessorConfig("paddleocr_vl", 14, 2, 1, HALF, HALF, min_pixels=147384, max_pixels=2822400),
    HF_CLASS_DEFAULTS, paddle_smart_resize,
    {"pil": f"{_HF}_pil_paddleocr_vl:PaddleOCRVLImageProcessorPil",
     "torchvision": f"{_HF}_paddleocr_vl:PaddleOCRVLImageProcessor"},
    "PaddleOCRVLImageProcessor", f"{_HF}_pil_paddleocr_vl:PaddleOCRVLImageProcessorKwargs",
    in_engines=True))  # tests/engines/test_engine_vllm_qwen_like.py, test_engine_sglang_paddle.py

__all__ = ["PaddleOCRVLProcessor", "paddle_smart_resize", "upscale_short_side"]
