"""The upstream Kimi-K2.5 (MoonViT) preprocessing, re-implemented in plain NumPy + Pillow.

The oracle of the Kimi parity tests and of the kernels that serve Kimi.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

KIMI_DEFAULTS = dict(
    in_patch_limit=16384,
    patch_limit_on_one_side=512,
    patch_size=14,
    merge_kernel_size=2,
    image_mean=(0.5, 0.5, 0.5),
    image_std=(0.5, 0.5, 0.5),
)


def kimi_sizes(w: int, h: int, cfg=KIMI_DEFAULTS):
    """Upstream navit resize: returns (new_w, new_h, padded_w, padded_h)."""
    p = cfg["patch_size"]
    side = cfg["patch_limit_on_one_side"]
    pw = float(max(1, w // p))
    ph = float(max(1, h // p))
    scale = min(1.0, math.sqrt(cfg["in_patch_limit"] / (pw * ph)), side * p / w, side * p / h)
    new_w = min(max(1, int(w * scale)), side * p)
    new_h = min(max(1, int(h * scale)), side * p)
    f = cfg["merge_kernel_size"] * p
    return new_w, new_h, new_w + (f - new_w % f) % f, new_h + (f - new_h % f) % f


def kimi_reference(image: Image.Image, cfg=KIMI_DEFAULTS):
    """Returns (pixel_values [N,3,P,P] float32, grid [1, H/P, W/P])."""
    p = cfg["patch_size"]
    rgb = image.convert("RGB")
    w, h = rgb.size
    new_w, new_h, pad_w, pad_h = kimi_sizes(w, h, cfg)
    resized = np.asarray(rgb.resize((new_w, new_h), Image.Resampling.BICUBIC))
    canvas = np.zeros((pad_h, pad_w, 3), dtype=np.uint8)  # zero padding right and bottom
    canvas[:new_h, :new_w] = resized
    x = (canvas / 255.0).astype(np.float32)  # float64 division, then float32
    # Upstream's constants are float64 arrays (np.array of the config's Python floats); the
    # in-place ops compute in float64 and store float32, one rounding per step.
    mean = np.array(list(cfg["image_mean"]))
    inv_std = 1.0 / np.array(list(cfg["image_std"]))
    assert mean.dtype == inv_std.dtype == np.float64
    x -= mean
    x *= inv_std
    assert x.dtype == np.float32
    gh, gw = pad_h // p, pad_w // p
    chw = np.transpose(x, (2, 0, 1))
    patches = chw.reshape(3, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, 3, p, p)
    return np.ascontiguousarray(patches), np.array([[1, gh, gw]], dtype=np.int64)


def reference_batch(images, cfg=KIMI_DEFAULTS):
    """The references of several images, concatenated as the processor batches them."""
    parts = [kimi_reference(im, cfg) for im in images]
    return np.concatenate([a for a, _ in parts]), np.concatenate([g for _, g in parts])
