"""The oracle most tests compare with: transformers' PIL Qwen2-VL processor.

Configured like smg_fast's family; its outputs cached on disk (support.oracle_cache).
"""

from __future__ import annotations

from PIL import Image

from smg_fast.testing.oracles import HUB_QWEN as QWEN_HF_CONFIGS

QWEN_FAMILIES = tuple(QWEN_HF_CONFIGS)


def make_hf_qwen(family: str, *, min_pixels=None, max_pixels=None, patch_size=None):
    """transformers' Qwen2VLImageProcessorPil configured like smg_fast's `family`.

    Optionally with the same min/max pixel or patch overrides; checked through its attributes.
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from smg_fast.testing.oracles import hf_qwen

    proc = hf_qwen(Qwen2VLImageProcessorPil, family, min_pixels=min_pixels,
                   max_pixels=max_pixels, patch_size=patch_size)
    assert proc.resample == Image.Resampling.BICUBIC
    assert proc.do_resize and proc.do_rescale and proc.do_normalize and proc.do_convert_rgb
    return proc


def hf_call(hf_proc, images, **kwargs):
    """The oracle's (pixel_values, image_grid_thw) as arrays (cached by support.oracle_cache)."""
    from support.oracle_cache import hf_processor_call

    out = hf_processor_call(hf_proc, images, **kwargs)
    return out["pixel_values"], out["image_grid_thw"]
