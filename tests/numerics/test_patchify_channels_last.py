"""The channel-last patch order (PatchOrder.CHANNELS_LAST) against NumPy's reshape of the image.

Gemma 4's layout, written independently of the native code as transformers' convert_image_to_patches
computes it: (C, gh, P, gw, P) -> (gh, gw, P, P, C) -> rows; every value the pipeline's own table
entry for its channel and byte; grid cells past the image read as byte 0. Every dtype, RGB and
RGBX sources, a grid larger than the image."""

from __future__ import annotations

import numpy as np
import pytest

import smg_fast
from smg_fast import _native

DTYPES = {"float32": _native.DType.FLOAT32, "bfloat16": _native.DType.BFLOAT16,
          "float16": _native.DType.FLOAT16, "uint8": _native.DType.UINT8}


def expected(img: np.ndarray, lut: np.ndarray, patch: int, gh: int, gw: int) -> np.ndarray:
    """Rows of channel-last patches of img (H, W, 3) padded with byte 0 to the grid."""
    canvas = np.zeros((gh * patch, gw * patch, 3), np.uint8)
    canvas[:img.shape[0], :img.shape[1]] = img
    values = np.stack([lut[c][canvas[..., c]] for c in range(3)], axis=0)  # C, H, W
    return (values.reshape(3, gh, patch, gw, patch).transpose(1, 3, 2, 4, 0)
            .reshape(gh * gw, -1))


# (recipe, rescale, mean, std): CLIP-style, Gemma 4's rescale only, Kimi's recipe
NORMS = {"clip": (_native.LutRecipe.HF_RESCALE_NORMALIZE, 1 / 255, [0.48, 0.46, 0.41],
                  [0.27, 0.26, 0.28]),
         "rescale": (_native.LutRecipe.HF_RESCALE_NORMALIZE, 1 / 255, [0, 0, 0], [1, 1, 1]),
         "kimi": (_native.LutRecipe.KIMI_DIVIDE_MULTIPLY, 1 / 255,
                  [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711])}
# Kimi's CLIP constants in float32 fail the single-precision check: the double-precision order,
# each lane with its own channel's constants (the narrower dtypes pass it)
DOUBLE_FORM = ("kimi", "float32")


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("patch,size,grid", [(16, (48, 32), (2, 3)), (14, (30, 20), (2, 3)),
                                             (16, (48, 48), (3, 3)), (5, (7, 3), (1, 2)),
                                             (16, (37, 45), (3, 3)), (3, (10, 4), (2, 4)),
                                             (17, (40, 20), (2, 3))])
def test_channel_last_rows(norm, dtype, channels, patch, size, grid):
    """Every value the table's, whichever kernel wrote it (the AVX-512 one for patches to 16)."""
    rng = np.random.default_rng(patch * 100 + channels)
    w, h = size
    src = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    recipe, rescale, mean, std = NORMS[norm]
    pipe = _native.Pipeline(recipe=recipe, rescale=rescale, mean=mean, std=std,
                            dtype=DTYPES[dtype], filter=_native.Filter.BICUBIC,
                            pass_order=_native.PassOrder.PILLOW13, patch=patch, merge=1,
                            temporal=1, patch_order=_native.PatchOrder.CHANNELS_LAST)
    assert pipe.patch_order == _native.PatchOrder.CHANNELS_LAST
    gh, gw = grid
    lut = pipe.lut
    out = np.empty(pipe.output_elems(w, h, gh, gw), lut.dtype)
    pipe.run(src, w, h, gh, gw, out)  # same size: the resize is a copy
    want = expected(src[..., :3], lut, patch, gh, gw)
    assert np.array_equal(out.reshape(gh * gw, -1), want)
    simd = smg_fast.cpu_features()["avx512vbmi"] and patch <= 16 and dtype != "uint8"
    if not simd:
        assert pipe.fixed_kernel == ("copy" if dtype == "uint8" else "table")
    else:
        assert pipe.fixed_kernel == ("avx512" if (norm, dtype) == DOUBLE_FORM else "avx512-fast")
