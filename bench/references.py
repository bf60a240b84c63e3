"""The references the bench/ suites and the regression gate (bench/gate.py) measure smg-fast
against, and the benchmark photo. Shared so both measure exactly the same thing.

- Qwen2-VL / Qwen2.5-VL / Qwen3-VL: transformers' PIL/NumPy processor (``Qwen2VLImageProcessorPil``)
  configured with the family's published hub config.
- Kimi-K2.5: transformers has no PIL processor for it, so ``kimi_upstream_numpy`` below is a
  NumPy/PIL implementation of the upstream MoonViT preprocessing written for this suite.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
from PIL import Image

PHOTO = "astronaut.png"  # scikit-image's sample photo, RGB 512x512

from smg_fast.testing.oracles import HUB_QWEN as HF_QWEN_CONFIGS  # noqa: E402,F401

# Kimi-K2.5 media_proc_cfg defaults.
KIMI_UPSTREAM_CONFIG = dict(in_patch_limit=16384, patch_limit_on_one_side=512, patch_size=14,
                            merge_kernel_size=2, image_mean=(0.5, 0.5, 0.5),
                            image_std=(0.5, 0.5, 0.5))


# --------------------------------------------------------------------------------------------
# Upstream NumPy reference for Kimi-K2.5 (MoonViT). Written for this benchmark from the published
# algorithm: navit resize, PIL bicubic, zero padding right/bottom, (x / 255.0) in float64 cast to
# float32, then in place (float32 array, float64 operands, so float64 arithmetic stored as float32)
# minus the float64 mean, times the float64 1.0 / std; patches [N, 3, P, P] in row-major order.
# --------------------------------------------------------------------------------------------


def kimi_navit_size(width: int, height: int, cfg=KIMI_UPSTREAM_CONFIG) -> tuple[int, int]:
    """Target (width, height): never upscales, truncates, caps each side at limit * patch."""
    patch = cfg["patch_size"]
    side_cap = cfg["patch_limit_on_one_side"] * patch
    patches_w = float(max(1, width // patch))
    patches_h = float(max(1, height // patch))
    scale = min(
        1.0,
        math.sqrt(cfg["in_patch_limit"] / (patches_w * patches_h)),
        side_cap / width,
        side_cap / height,
    )
    return (min(max(1, int(width * scale)), side_cap),
            min(max(1, int(height * scale)), side_cap))


def kimi_upstream_numpy(image: Image.Image, cfg=KIMI_UPSTREAM_CONFIG) -> np.ndarray:
    """Kimi-K2.5 upstream NumPy reference: pixel_values [N, 3, P, P] float32."""
    patch = cfg["patch_size"]
    multiple = patch * cfg["merge_kernel_size"]
    rgb = image.convert("RGB")
    new_w, new_h = kimi_navit_size(rgb.width, rgb.height, cfg)
    resized = np.asarray(rgb.resize((new_w, new_h), Image.Resampling.BICUBIC))
    padded_w = -(-new_w // multiple) * multiple
    padded_h = -(-new_h // multiple) * multiple
    canvas = np.zeros((padded_h, padded_w, 3), dtype=np.uint8)
    canvas[:new_h, :new_w] = resized
    pixels = (canvas / 255.0).astype(np.float32)
    pixels -= np.asarray(cfg["image_mean"], dtype=np.float64)
    pixels *= 1.0 / np.asarray(cfg["image_std"], dtype=np.float64)
    rows, cols = padded_h // patch, padded_w // patch
    # HWC -> (rows, patch_y, cols, patch_x, C) -> (rows, cols, C, patch_y, patch_x)
    tiles = pixels.reshape(rows, patch, cols, patch, 3).transpose(0, 2, 4, 1, 3)
    return np.ascontiguousarray(tiles).reshape(rows * cols, 3, patch, patch)


# --------------------------------------------------------------------------------------------
# References from transformers
# --------------------------------------------------------------------------------------------


def make_hf_pil_qwen(family: str):
    """transformers' PIL/NumPy Qwen2-VL processor configured like `family`'s hub config."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from smg_fast.testing.oracles import hf_qwen

    return hf_qwen(Qwen2VLImageProcessorPil, family)


def photo_file() -> Path:
    """scikit-image's sample photo; FileNotFoundError when scikit-image (or the file) is missing."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("scikit-image is not installed (its sample photo is the benchmark "
                                "input)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / PHOTO
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


def load_photos(sizes) -> dict[tuple[int, int], Image.Image]:
    """The photo resized once with LANCZOS to every (width, height) in `sizes` (RGB, loaded)."""
    with Image.open(photo_file()) as im:
        base = im.convert("RGB")
    return {size: base.resize(size, Image.Resampling.LANCZOS) for size in sizes}
