"""Resizes of one shape share its weights and plans (csrc/resample/shape_cache.hpp).

Against Pillow and torch: other pixels (a real photo's too) through a shape made before, with the
cache's counters showing the hit; shapes that differ in one setting only (resampler, filter, pass
order, channels, RGB output, pixel format) called in turn; a shape made again after many others
pushed it out, within the cache's bounds; threads resizing shapes at the same time; and forked
children that resize while the parent's threads use the cache."""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from PIL import Image
from support.fork_watch import run_fork_script

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
def test_other_pixels_through_a_shape_made_before(shape, rs, real_images):
    w, h, ow, oh = shape
    photo = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BILINEAR))
    _native.shape_cache_clear()
    for i, img in enumerate([_image(w, h, 3, 1), photo, _image(w, h, 3, 2)]):
        before = _native.shape_cache_stats()
        ours = _native.resize(img, ow, oh, _native.Filter.BICUBIC, P13, rs)
        after = _native.shape_cache_stats()
        assert (after["hits"] - before["hits"], after["misses"] - before["misses"]) == \
            ((0, 1) if i == 0 else (1, 0))
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


def test_pixel_formats_and_rgb_output_of_one_shape_called_in_turn():
    """RGBX kept (4 channels out), RGBX read as RGB (its pad byte dropped) and RGB, same sizes."""
    rgbx = _image(401, 203, 4, 5)
    rgb = np.ascontiguousarray(rgbx[:, :, :3])
    want_rgb = _pillow(rgb, 150, 90, _native.Filter.BICUBIC, P13)
    want_rgbx = _pillow(rgbx, 150, 90, _native.Filter.BICUBIC, P13)
    _native.shape_cache_clear()
    for _ in range(2):
        got = _native.resize(rgbx, 150, 90, _native.Filter.BICUBIC, P13, R.PILLOW)
        assert np.array_equal(got, want_rgbx)
        for src, fmt in ((rgbx, F.RGBX), (rgb, F.RGB)):
            got = _native.resize_rgb(src, 150, 90, _native.Filter.BICUBIC, P13, R.PILLOW, fmt)
            assert np.array_equal(got, want_rgb), fmt
    assert _native.shape_cache_stats()["entries"] == 3


def test_a_shape_made_again_after_others_pushed_it_out():
    img = _image(257, 129, 3, 9)
    want = _pillow(img, 100, 50, _native.Filter.BICUBIC, P13)
    first = _native.resize(img, 100, 50, _native.Filter.BICUBIC, P13, R.PILLOW)
    small = _image(40, 30, 3, 1)
    for ow in range(10, 110):  # more shapes than the cache keeps
        _native.resize(small, ow, 20, _native.Filter.BICUBIC, P13, R.PILLOW)
    assert _native.shape_cache_stats()["entries"] == 64
    misses = _native.shape_cache_stats()["misses"]
    again = _native.resize(img, 100, 50, _native.Filter.BICUBIC, P13, R.PILLOW)
    assert _native.shape_cache_stats()["misses"] == misses + 1
    assert np.array_equal(first, want) and np.array_equal(again, want)


def test_large_shapes_stay_within_the_byte_budget():
    """Wide outputs with long windows (plans of megabytes): at most 32 MiB kept in all."""
    row = _image(1500, 2, 4, 3)
    for k in range(12):
        _native.resize(row, 20000 + 997 * k, 1, _native.Filter.LANCZOS, P13, R.PILLOW)
        assert _native.shape_cache_stats()["bytes"] <= 32 << 20
    huge = _image(2, 2, 3, 4)  # 2 -> 2^20 wide: a plan over a quarter of the budget is not kept
    before = _native.shape_cache_stats()["entries"]
    _native.resize(huge, 1 << 20, 1, _native.Filter.BICUBIC, P13, R.PILLOW)
    assert _native.shape_cache_stats()["entries"] == before


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


FORK = textwrap.dedent("""
    import os, threading, time
    import numpy as np
    from smg_fast import _native
    from support.fork_watch import fork_and_watch
    IMG = np.random.default_rng(0).integers(0, 255, (120, 160, 3), np.uint8)
    def run(k=0):
        _native.resize(IMG, 40 + k % 97, 30 + k % 13, _native.Filter.BICUBIC,
                       _native.PassOrder.PILLOW13, _native.Resampler.PILLOW)
    stop = threading.Event()
    def churn():  # new shapes (misses, puts, evictions) and known ones, all the time
        k = 0
        while not stop.is_set():
            run(k)
            k += 1
    for _ in range(2):
        threading.Thread(target=churn, daemon=True).start()
    start = time.monotonic()
    forks, stuck = fork_and_watch(lambda: run(1000), lambda: time.monotonic() - start < 20,
                                  max_forks=200, polls=400, poll_s=0.01)
    stop.set()
    print(forks, stuck)
    os._exit(0)
""")


def test_fork_while_threads_use_the_cache():
    """A forked child never inherits the cache's lock held by a parent's thread it lacks."""
    forks, stuck = run_fork_script(FORK)
    assert stuck == 0, f"{stuck} of {forks} forked children waited forever on the shape cache"
