"""HunyuanOCR (HunYuanVL): Qwen's smart_resize, BICUBIC always, raster patches of 3 * T * P * P.

transformers' HunYuanVLImageProcessorPil / HunYuanVLImageProcessor: Qwen's smart_resize with
patch 16, a resize that is BICUBIC whatever ``resample`` says (the hub config's LANCZOS is not
used), rescale and normalize as Qwen, and patches in row-major (raster) order, not in merge
windows, each row [C, T, P, P] flattened; ``get_number_of_image_patches`` returns the (h, w)
grid. Registers the family."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UnsupportedCallError
from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules
from ..registry import register
from .qwen import CALLS, QwenVLProcessor, read_folder, smart_resize, validate
from .qwen_like import qwen_like_family

BICUBIC = 3


class HunyuanVLProcessor(QwenVLProcessor):
    """Qwen's smart_resize; raster patches of 3 * T * P * P values."""

    def _layout(self) -> tuple[int, int]:
        return 1, self.config.temporal_patch_size  # raster order, the temporal copy

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        """HunYuanVLProcessor's count: a newline token per merged row, and the two wrappers.

        (h / m) * (w / m + 1) + 2 for grid rows [t, h, w] (its cat_extra_token default)."""
        m = self.config.merge_size
        return grid[:, 1] // m * (grid[:, 2] // m + 1) + 2


def _read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """Qwen's reading of a preprocessor_config.json without ``resample``, which is not used."""
    out = read_folder(pre)
    out.pop("resample", None)
    return out


def _validate(cfg: ProcessorConfig) -> None:
    """Qwen's checks, and resample BICUBIC: transformers' classes resize with nothing else."""
    validate(cfg)
    if cfg.resample != BICUBIC:
        raise ValueError(f"hunyuan_vl resizes BICUBIC (resample=3) as transformers' HunYuanVL "
                         f"classes do whatever resample says; got resample={cfg.resample}")


def _check_call(cfg: ProcessorConfig, fields: dict[str, Any]) -> None:
    """A call's ``resample`` is dropped, as transformers' classes ignore it.

    Any other value than BICUBIC would otherwise resize differently from them."""
    if fields.pop("resample", BICUBIC) not in range(6):
        raise UnsupportedCallError("resample must be a PIL.Image.Resampling value")


# transformers' HunYuanVLImageProcessorPil class attributes (what a folder lacks takes these).
HF_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 16, "temporal_patch_size": 1, "merge_size": 2, "min_pixels": 512 * 512,
    "max_pixels": 2048 * 2048, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255,
}

_HF = "transformers.models.hunyuan_vl.image_processing"
# tencent/HunyuanOCR's preprocessor_config.json: 512*512 .. 2048*2048 pixels, patch 16, merge 2,
# temporal 1, CLIP mean/std; its resample 1 (LANCZOS) is not used by transformers' classes.
HUNYUAN = register(qwen_like_family(
    "hunyuan_vl", HunyuanVLProcessor,
    ProcessorConfig("hunyuan_vl", 16, 2, 1, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD,
                    min_pixels=512 * 512, max_pixels=2048 * 2048),
    HF_CLASS_DEFAULTS, smart_resize,
    {"pil": f"{_HF}_pil_hunyuan_vl:HunYuanVLImageProcessorPil",
     "torchvision": f"{_HF}_hunyuan_vl:HunYuanVLImageProcessor"},
    "HunYuanVLImageProcessor", f"{_HF}_pil_hunyuan_vl:HunYuanVLImageProcessorKwargs",
    calls=CallRules(CALLS.fields, CALLS.size, _check_call), read=_read_folder, check=_validate,
    as_grid=True, extra_attributes={"spatial_patch_size": 1},
    in_engines=True))  # tests/engines/test_engine_vllm_qwen_like.py (vLLM's transformers backend)

__all__ = ["HunyuanVLProcessor"]
