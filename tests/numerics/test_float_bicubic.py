"""bicubic_float_tiles against torch's F.interpolate(mode="bicubic", antialias=False), bit for bit.

The native resize of a float32 canvas given as tiles (Phi-4's global image) equals torch's CPU
kernel on the assembled canvas: downscales by integer and fractional factors, upscales, one
side unchanged, 1-pixel and odd sizes, normalized pixel levels and wide-range values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from smg_fast import _native

CASES = [  # rows, cols, tile_h, tile_w, out_h, out_w
    (2, 3, 448, 448, 448, 448), (6, 6, 448, 448, 448, 448), (1, 7, 448, 448, 448, 448),
    (5, 1, 448, 448, 448, 448), (1, 1, 100, 37, 448, 448), (1, 1, 1, 1, 448, 448),
    (1, 1, 1000, 448, 448, 448), (2, 2, 64, 64, 100, 300), (1, 1, 5, 3, 7, 2),
    (3, 2, 17, 29, 13, 111), (1, 1, 448, 448, 448, 448),
]


def torch_resize(canvas: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """torch's own result for a (C, H, W) float32 canvas."""
    t = torch.from_numpy(np.ascontiguousarray(canvas))[None]
    return torch.nn.functional.interpolate(t, size=(out_h, out_w), mode="bicubic",
                                           align_corners=False, antialias=False)[0].numpy()


@pytest.mark.parametrize("levels", [True, False], ids=["normalized_levels", "wide_floats"])
@pytest.mark.parametrize(("rows", "cols", "th", "tw", "oh", "ow"), CASES)
def test_equals_torch(rows, cols, th, tw, oh, ow, levels):
    rng = np.random.default_rng(rows * 1000 + cols * 100 + th + tw)
    shape = (rows * cols, 3, th, tw)
    if levels:  # what Phi-4 resizes: (u / 255 - 0.5) / 0.5 in float32
        tiles = ((rng.integers(0, 256, shape).astype(np.float32) / 255 - 0.5) / 0.5)
    else:
        tiles = rng.normal(0, 1000, shape)
    tiles = tiles.astype(np.float32)
    canvas = tiles.reshape(rows, cols, 3, th, tw).transpose(2, 0, 3, 1, 4).reshape(
        3, rows * th, cols * tw)
    out = np.full((3, oh, ow), np.nan, np.float32)
    _native.bicubic_float_tiles(tiles, rows, cols, out)
    ref = torch_resize(canvas, oh, ow)
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


def test_bad_arguments_are_typed_errors():
    tiles = np.zeros((6, 3, 8, 8), np.float32)
    out = np.zeros((3, 4, 4), np.float32)
    with pytest.raises(TypeError, match="float32"):
        _native.bicubic_float_tiles(tiles.astype(np.float64), 2, 3, out)
    with pytest.raises(ValueError, match="rows \\* cols"):
        _native.bicubic_float_tiles(tiles, 2, 2, out)
    with pytest.raises(ValueError, match="C-contiguous"):
        _native.bicubic_float_tiles(tiles, 2, 3, np.zeros((3, 4, 8), np.float32)[:, :, ::2])
    with pytest.raises(ValueError, match="src's C"):
        _native.bicubic_float_tiles(tiles, 2, 3, np.zeros((1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="overlaps"):
        _native.bicubic_float_tiles(tiles, 2, 3, tiles[0])
    with pytest.raises(ValueError, match="src must be"):
        _native.bicubic_float_tiles(tiles[0], 2, 3, out)


def test_channel_count_past_int_range_is_refused():
    """2^31 channels, which would wrap the kernel's int channel count, are refused.

    (A 16 GiB pair of arrays; here views of small buffers, never read.)"""
    n = 1 << 31
    src = np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (1, n, 1, 1), (4 * n, 4, 4, 4))
    out = np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (n, 1, 1), (4, 4, 4))
    assert src.flags.c_contiguous and out.flags.c_contiguous and out.flags.writeable
    with pytest.raises(ValueError, match="channels"):
        _native.bicubic_float_tiles(src, 1, 1, out)
