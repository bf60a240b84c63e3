"""Resizes of one shape share its weights and plans (csrc/resample/shape_cache.hpp).

Against Pillow and torch: other pixels through a shape made before, shapes that differ in one
setting only (resampler, filter, pass order, channels, pixel format) called in turn, a shape made
again after many others pushed it out, and threads resizing shapes at the same time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from PIL import Image

from smg_fast import _native

F = _native.PixelFormat
R = _native.Resampler
HF = _native.PassOrder.HORIZONTAL_FIRST
P13 = _native.PassOrder.PILLOW13
PIL_FILTERS = {_native.Filter.BICUBIC: Image.Resampling.BICUBIC,
               _native.Filter.BILINEAR: Image.Resampling.BILINEAR}
TORCH_MODES = {_native.Filter.BICUBIC: "bicubic", _native.Filter.BILINEAR: "bilinear"}


def _image(w: int, h: int, channels: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (h, w, channels), np.uint8)
    ramp = np.broadcast_to(np.linspace(0, 255, w)[None, :, None], noise.shape)
    return np.where(noise > 170, noise, ramp).astype(np.uint8)


def _pillow(img: np.ndarray, ow: int, oh: int, flt, order) -> np.ndarray:
    """Pillow's resize in the given pass order, each pass a resize of its own (same arithmetic)."""
    mode = "RGB" if img.shape[2] == 3 else "RGBX"
    im = Image.frombytes(mode, (img.shape[1], img.shape[0]), img.tobytes())
    steps = [(ow, img.shape[0]), (ow, oh)]
    if order == P13 and img.shape[0] - oh > 0 and img.shape[0] - oh > 2 * (img.shape[1] - ow):
        steps = [(img.shape[1], oh), (ow, oh)]
    for size in steps:
        if size != im.size:
            im = im.resize(size, PIL_FILTERS[flt])
    return np.asarray(im).reshape(oh, ow, img.shape[2])


def _torch(img: np.ndarray, ow: int, oh: int, flt) -> np.ndarray:
    t = torch.from_numpy(img.copy()).permute(2, 0, 1)[None]
    out = torch.nn.functional.interpolate(t, size=(oh, ow), mode=TORCH_MODES[flt], antialias=True,
                                          align_corners=False)
    return out[0].permute(1, 2, 0).numpy()


def _reference(img, ow, oh, flt, order, rs) -> np.ndarray:
    return _torch(img, ow, oh, flt) if rs == R.TORCH else _pillow(img, ow, oh, flt, order)


# (w, h, out w, out h): a downscale of both sides, an upscale, and one whose height shrinks more
# than twice its width (Pillow 13 runs that vertical pass first).
SHAPES = [(333, 217, 128, 96), (64, 48, 200, 150), (300, 901, 280, 100)]


@pytest.mark.parametrize("rs", [R.PILLOW, R.TORCH])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_other_pixels_through_a_shape_made_before(shape, rs):
    w, h, ow, oh = shape
    for seed in range(3):
        img = _image(w, h, 3, seed)
        ours = _native.resize(img, ow, oh, _native.Filter.BICUBIC, P13, rs)
        assert np.array_equal(ours, _reference(img, ow, oh, _native.Filter.BICUBIC, P13, rs))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_differing_in_one_setting_called_in_turn(shape):
    w, h, ow, oh = shape
    settings = [(c, flt, order, rs) for c in (3, 4) for flt in PIL_FILTERS for order in (HF, P13)
                for rs in (R.PILLOW, R.TORCH)]
    for rnd in range(2):  # the second round finds every shape made
        for i, (c, flt, order, rs) in enumerate(settings):
            img = _image(w, h, c, 100 * rnd + i)
            ours = _native.resize(img, ow, oh, flt, order, rs)
            want = _reference(img, ow, oh, flt, order, rs)
            assert np.array_equal(ours, want), (c, flt, order, rs)


def test_pixel_formats_of_one_shape_called_in_turn():
    """RGBX read as RGB (the pad byte dropped) and RGB of the same sizes: each its own shape."""
    rgbx = _image(401, 203, 4, 5)
    rgb = np.ascontiguousarray(rgbx[:, :, :3])
    want = _pillow(rgb, 150, 90, _native.Filter.BICUBIC, P13)
    for _ in range(2):
        for src, fmt in ((rgbx, F.RGBX), (rgb, F.RGB)):
            got = _native.resize_rgb(src, 150, 90, _native.Filter.BICUBIC, P13, R.PILLOW, fmt)
            assert np.array_equal(got, want), fmt


def test_a_shape_made_again_after_others_pushed_it_out():
    img = _image(257, 129, 3, 9)
    want = _pillow(img, 100, 50, _native.Filter.BICUBIC, P13)
    first = _native.resize(img, 100, 50, _native.Filter.BICUBIC, P13, R.PILLOW)
    small = _image(40, 30, 3, 1)
    for ow in range(10, 110):  # more shapes than the cache keeps
        _native.resize(small, ow, 20, _native.Filter.BICUBIC, P13, R.PILLOW)
    again = _native.resize(img, 100, 50, _native.Filter.BICUBIC, P13, R.PILLOW)
    assert np.array_equal(first, want) and np.array_equal(again, want)


def test_threads_resizing_shapes_at_the_same_time():
    """Shapes made and found by several threads at once (the resize releases the GIL)."""
    jobs = [(_image(200 + 37 * k, 150 + 11 * k, 3, k), 64 + 8 * (k % 4), 48 + 6 * (k % 3),
             R.TORCH if k % 2 else R.PILLOW) for k in range(12)]
    wants = [_reference(img, ow, oh, _native.Filter.BICUBIC, P13, rs) for img, ow, oh, rs in jobs]

    def run(k: int) -> bool:
        img, ow, oh, rs = jobs[k % len(jobs)]
        got = _native.resize(img, ow, oh, _native.Filter.BICUBIC, P13, rs)
        return np.array_equal(got, wants[k % len(jobs)])

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(8 * len(jobs))))
