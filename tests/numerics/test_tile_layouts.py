"""The tiling families' native layout steps, against NumPy.

Pipeline.run's placement (left / top: the resize placed on its grid's canvas, the rest pixel 0),
patches_to_planar (a patch grid as one zero-padded channel-first canvas) and resize_rgb (a resize
that reads a pixel format and writes RGB). The oracle is NumPy over the plain resize: the 3 x 256
table applied to the placed canvas, a transpose, the first three channels; the families' parity
tests compare the same steps with transformers."""

from __future__ import annotations

import numpy as np
import pytest

from smg_fast import _native

DType, Filter, PassOrder = _native.DType, _native.Filter, _native.PassOrder
PF = _native.PixelFormat
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
NP = {DType.FLOAT32: np.float32, DType.BFLOAT16: np.uint16, DType.UINT8: np.uint8}


def _pipe(dtype: DType, patch: int, resampler=_native.Resampler.PILLOW) -> _native.Pipeline:
    return _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                            mean=CLIP_MEAN, std=CLIP_STD, dtype=dtype, filter=Filter.BICUBIC,
                            pass_order=PassOrder.PILLOW13, patch=patch, merge=1, temporal=1,
                            resampler=resampler)


def _tiles(canvas: np.ndarray, lut: np.ndarray, patch: int) -> np.ndarray:
    """(rows * cols, 3, patch, patch) tiles of the uint8 canvas (H, W, 3), normalized."""
    vals = np.stack([lut[c][canvas[..., c]] for c in range(3)])
    gh, gw = canvas.shape[0] // patch, canvas.shape[1] // patch
    x = vals.reshape(3, gh, patch, gw, patch).transpose(1, 3, 0, 2, 4)
    return np.ascontiguousarray(x).reshape(gh * gw, 3, patch, patch)


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.BFLOAT16, DType.UINT8])
@pytest.mark.parametrize("left,top,resize_w,resize_h,grid_h,grid_w", [
    (0, 0, 60, 40, 2, 3),      # no placement: run() as it always was
    (0, 21, 72, 30, 3, 3),     # centred vertically (LLaVA's wide images)
    (13, 0, 46, 72, 3, 3),     # centred horizontally (tall images)
    (5, 30, 20, 9, 3, 2),      # inside one tile, padding on every side
    (1, 47, 70, 1, 2, 3),      # one row, in the last row of a tile band
    (71, 40, 1, 8, 2, 3),      # one column at the right edge, down to the bottom edge
    (17, 5, 55, 43, 2, 3),     # flush with the right and bottom edges
])
def test_placed_run_equals_numpy(photo, channels, dtype, left, top, resize_w, resize_h, grid_h,
                                 grid_w):
    patch = 24
    rgb = np.ascontiguousarray(np.asarray(photo)[:200, :300])
    src = rgb if channels == 3 else np.dstack([rgb, np.full(rgb.shape[:2], 77, np.uint8)])
    pipe = _pipe(dtype, patch)
    out = np.full(grid_h * grid_w * 3 * patch * patch, 7, NP[dtype])
    pipe.run(src, resize_w, resize_h, grid_h, grid_w, out, 0, left=left, top=top)
    resized = _native.resize(rgb, resize_w, resize_h, Filter.BICUBIC, PassOrder.PILLOW13)
    canvas = np.zeros((grid_h * patch, grid_w * patch, 3), np.uint8)
    canvas[top:top + resize_h, left:left + resize_w] = resized
    lut = np.asarray(pipe.lut) if dtype != DType.UINT8 else np.tile(np.arange(256, dtype=np.uint8),
                                                                       (3, 1))
    want = _tiles(canvas, lut, patch)
    assert np.array_equal(out.reshape(want.shape), want)


def test_placed_run_at_an_offset_leaves_the_rest(photo):
    """Only the grid's elements from offset on are written."""
    pipe = _pipe(DType.FLOAT32, 16)
    rgb = np.ascontiguousarray(np.asarray(photo)[:64, :64])
    need = 2 * 2 * 3 * 16 * 16
    out = np.full(need + 10, 7, np.float32)
    pipe.run(rgb, 20, 30, 2, 2, out, 5, left=6, top=1)
    assert (out[:5] == 7).all() and (out[5 + need:] == 7).all() and (out[5:5 + need] != 7).all()


@pytest.mark.parametrize("left,top,w,h", [(-1, 0, 10, 10), (0, -1, 10, 10), (23, 0, 10, 10),
                                          (0, 23, 10, 10), (0, 0, 33, 10)])
def test_placement_outside_the_grid_is_refused(left, top, w, h):
    pipe = _pipe(DType.FLOAT32, 16)
    src = np.zeros((20, 20, 3), np.uint8)
    out = np.zeros(2 * 2 * 3 * 16 * 16, np.float32)
    with pytest.raises(ValueError):
        pipe.run(src, w, h, 2, 2, out, 0, left=left, top=top)


def test_placement_with_jpeg_is_refused():
    pipe = _pipe(DType.FLOAT32, 16)
    src = np.zeros((20, 20, 3), np.uint8)
    out = np.zeros(3 * 16 * 16, np.float32)
    with pytest.raises(ValueError, match="placement"):
        pipe.run(src, 10, 10, 1, 1, out, 0, fmt=PF.RGB, jpeg=b"\xff\xd8", left=1)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16, np.uint8])
@pytest.mark.parametrize("grid_h,grid_w,patch,canvas_h,canvas_w", [
    (2, 3, 16, 32, 48), (2, 3, 16, 40, 64), (1, 1, 5, 9, 5), (3, 1, 4, 12, 7)])
def test_patches_to_planar_equals_numpy(dtype, grid_h, grid_w, patch, canvas_h, canvas_w):
    rng = np.random.default_rng(grid_h * 100 + canvas_w)
    patches = rng.integers(1, 200, (grid_h * grid_w, 3, patch, patch)).astype(dtype)
    dst = np.full(3 * canvas_h * canvas_w + 4, 9, dtype)
    _native.patches_to_planar(patches, grid_h, grid_w, patch, dst, 2, canvas_h, canvas_w)
    image = patches.reshape(grid_h, grid_w, 3, patch, patch).transpose(2, 0, 3, 1, 4)
    want = np.zeros((3, canvas_h, canvas_w), dtype)
    want[:, :grid_h * patch, :grid_w * patch] = image.reshape(3, grid_h * patch, grid_w * patch)
    assert np.array_equal(dst[2:-2].reshape(want.shape), want)
    assert (dst[:2] == 9).all() and (dst[-2:] == 9).all()


@pytest.mark.parametrize("args,match", [
    (dict(canvas_h=31), "canvas"), (dict(grid_h=0), "positive"),
    (dict(patches=np.zeros(6 * 3 * 256 - 1, np.float32)), "elements"),
    (dict(dst=np.zeros(3 * 32 * 48, np.uint16)), "dtype"),
    (dict(dst=np.zeros(3 * 32 * 48 - 1, np.float32)), "too small"),
    (dict(offset=-1), "too small")])
def test_patches_to_planar_refuses_bad_arguments(args, match):
    kw = dict(patches=np.zeros(6 * 3 * 256, np.float32), grid_h=2, grid_w=3, patch=16,
              dst=np.zeros(3 * 32 * 48, np.float32), offset=0, canvas_h=32, canvas_w=48)
    kw.update(args)
    with pytest.raises(ValueError, match=match):
        _native.patches_to_planar(**kw)


@pytest.mark.parametrize("dtype", [object, np.dtype([("a", object)]), "U1", "V4", "M8[s]"])
def test_patches_to_planar_refuses_arrays_not_of_numbers(dtype):
    """Object arrays hold references, which a byte copy would duplicate uncounted."""
    kw = dict(grid_h=1, grid_w=1, patch=2, offset=0, canvas_h=2, canvas_w=2)
    with pytest.raises(TypeError, match="numbers"):
        _native.patches_to_planar(np.zeros(12, dtype), dst=np.zeros(12, dtype), **kw)


def test_patches_to_planar_refuses_overlap():
    buf = np.zeros(2 * 3 * 3 * 16 * 16, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        _native.patches_to_planar(buf[:3 * 256], 1, 1, 16, buf, 100, 16, 16)


@pytest.mark.parametrize("resampler", [_native.Resampler.PILLOW, _native.Resampler.TORCH])
@pytest.mark.parametrize("fmt", [PF.RGB, PF.RGBX, PF.GRAY, PF.RGBA_OVER_WHITE_PILLOW])
def test_resize_rgb_equals_convert_then_resize(photo, fmt, resampler):
    """The format's RGB conversion, then the plain resize of it (each channel on its own)."""
    rgb = np.ascontiguousarray(np.asarray(photo)[:180, :260])
    src = {PF.RGB: rgb, PF.GRAY: np.ascontiguousarray(rgb[..., :1]),
           PF.RGBX: np.dstack([rgb, np.full(rgb.shape[:2], 77, np.uint8)]),
           PF.RGBA_OVER_WHITE_PILLOW: np.dstack([rgb, (np.arange(260) % 256).astype(np.uint8)[
               None].repeat(180, 0)])}[fmt]
    got = _native.resize_rgb(src, 97, 61, Filter.LANCZOS, PassOrder.PILLOW13, resampler, fmt)
    converted = _native.to_rgb(src, fmt) if fmt != PF.RGB else rgb
    want = _native.resize(converted, 97, 61, Filter.LANCZOS, PassOrder.PILLOW13, resampler)
    assert got.shape[:2] == (61, 97) and got.shape[2] in (3, 4)
    assert np.array_equal(got[..., :3], want)


def test_resize_rgb_refuses_a_format_of_other_channels():
    with pytest.raises(ValueError):
        _native.resize_rgb(np.zeros((8, 8, 3), np.uint8), 4, 4, Filter.LANCZOS,
                           PassOrder.PILLOW13, _native.Resampler.PILLOW, PF.RGBX)
