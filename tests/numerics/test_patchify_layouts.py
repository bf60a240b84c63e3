"""The native normalize + patchify kernel on every layout shape, against NumPy.

Every shape it has a separate build for (patch 14 / 16 with 1 or 2 temporal copies, compiled per
normalization mode and dtype) and the run-time generic one (other patch sizes and copy counts,
normalizations whose single-precision form does not match the table), with zero padding on the right
and bottom. The oracle is NumPy: the 3 x 256 table applied to the resized pixels, then the
documented row / column order."""

from __future__ import annotations

import numpy as np
import pytest

from smg_fast import _native

DType, Filter, PassOrder = _native.DType, _native.Filter, _native.PassOrder
HF, KIMI = _native.LutRecipe.HF_RESCALE_NORMALIZE, _native.LutRecipe.KIMI_DIVIDE_MULTIPLY
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
ODD_MEAN = [0.123456789, 0.987654321, 0.5]  # arbitrary values: may need the double-precision form
ODD_STD = [0.0123456789, 3.21, 0.333333333]
DTYPES = {DType.FLOAT32: np.float32, DType.BFLOAT16: np.uint16, DType.FLOAT16: np.float16}


def reference(resized: np.ndarray, lut: np.ndarray, patch: int, merge: int, temporal: int,
              grid_h: int, grid_w: int) -> np.ndarray:
    h, w = resized.shape[:2]
    canvas = np.zeros((grid_h * patch, grid_w * patch, 3), np.uint8)  # padding is pixel 0
    canvas[:h, :w] = resized[..., :3]
    vals = np.stack([lut[c][canvas[..., c]] for c in range(3)])  # (C, H, W)
    x = vals.reshape(3, grid_h // merge, merge, patch, grid_w // merge, merge, patch)
    x = x.transpose(1, 4, 2, 5, 0, 3, 6)  # (bh, bw, mh, mw, C, py, px)
    x = np.repeat(x[:, :, :, :, :, None], temporal, axis=5)  # T copies after C
    return np.ascontiguousarray(x).reshape(grid_h * grid_w, 3 * temporal * patch * patch)


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("recipe,mean,std", [
    (HF, CLIP_MEAN, CLIP_STD), (KIMI, [0.5] * 3, [0.5] * 3),
    (HF, ODD_MEAN, ODD_STD), (KIMI, ODD_MEAN, ODD_STD)])
@pytest.mark.parametrize("patch,merge,temporal", [(14, 2, 2), (14, 1, 1), (16, 2, 2), (16, 2, 1),
                                                  (14, 2, 1), (16, 1, 2), (8, 2, 3), (5, 1, 2),
                                                  (17, 2, 2)])
def test_layout_equals_numpy(photo, channels, dtype, recipe, mean, std, patch, merge, temporal):
    rgb = np.ascontiguousarray(np.asarray(photo)[:300, :410])
    src = rgb
    if channels == 4:  # RGBX: the 4th byte must be ignored
        src = np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 77, np.uint8)], axis=2)
    # Resize to a size that leaves padding on both the right and the bottom of the grid.
    resize_w, resize_h = 331, 203
    grid_w = -(-resize_w // (patch * merge)) * merge + merge
    grid_h = -(-resize_h // (patch * merge)) * merge
    pipe = _native.Pipeline(recipe=recipe, rescale=1 / 255, mean=mean, std=std, dtype=dtype,
                            filter=Filter.BICUBIC, pass_order=PassOrder.PILLOW13, patch=patch,
                            merge=merge, temporal=temporal)
    rows = grid_h * grid_w
    out = np.full(rows * 3 * temporal * patch * patch, 7, DTYPES[dtype])
    pipe.run(src, resize_w, resize_h, grid_h, grid_w, out, 0)
    resized = _native.resize(np.ascontiguousarray(src[..., :3]), resize_w, resize_h,
                             Filter.BICUBIC, PassOrder.PILLOW13)
    want = reference(resized, pipe.lut, patch, merge, temporal, grid_h, grid_w)
    assert np.array_equal(out.reshape(want.shape).view(np.uint8), want.view(np.uint8))
