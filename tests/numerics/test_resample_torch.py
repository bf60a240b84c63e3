"""Resampler.TORCH against torch itself, for 1..4 channels and every pass the Resizer has.

The CPU torch of the test environment: interpolate(uint8, bicubic / lanczos, antialias=True),
what torchvision's resize runs. Also the pipeline reading each PixelFormat through the torch
resampler, and kernel_info showing the row kernels the torch resampler ran. test_isa_paths
reruns this file under every SMG_FAST_ISA cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from test_convert import CONVERTED, RESIZES, all_pairs, reference

from smg_fast import _native

F = _native.PixelFormat
TORCH = _native.Resampler.TORCH
BICUBIC = _native.Filter.BICUBIC
ORDER = _native.PassOrder.PILLOW13  # ignored by the torch resampler

# (in w, in h, out w, out h): shrink both, width / height only, upscale, extreme aspects, a
# tall shrink Pillow 13 would run vertically first (torch never does).
SIZES = [(37, 53, 56, 28), (640, 427, 644, 420), (300, 200, 97, 200), (300, 200, 300, 61),
         (45, 31, 301, 283), (1, 200, 28, 28), (4000, 25, 3000, 56), (250, 600, 250, 56),
         (64, 64, 64, 64)]


def torch_resize(img: np.ndarray, out_w: int, out_h: int, mode: str = "bicubic") -> np.ndarray:
    t = torch.from_numpy(np.array(img)).permute(2, 0, 1)[None]  # a writable copy
    out = torch.nn.functional.interpolate(t, size=(out_h, out_w), mode=mode,
                                          antialias=True, align_corners=False)
    return out[0].permute(1, 2, 0).contiguous().numpy()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}x{s[3]}")
def test_resize_equals_torch(size, channels):
    w, h, ow, oh = size
    img = np.random.default_rng(w * h + channels).integers(0, 256, (h, w, channels), np.uint8)
    ours = _native.resize(img, ow, oh, BICUBIC, ORDER, TORCH)
    assert np.array_equal(ours, torch_resize(img, ow, oh))


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}x{s[3]}")
def test_lanczos_equals_torch(size, channels):
    """torch's mode="lanczos" (6 taps at scale 1), what torchvision's LANCZOS resize runs."""
    w, h, ow, oh = size
    img = np.random.default_rng(w * h + channels).integers(0, 256, (h, w, channels), np.uint8)
    ours = _native.resize(img, ow, oh, _native.Filter.LANCZOS, ORDER, TORCH)
    assert np.array_equal(ours, torch_resize(img, ow, oh, "lanczos"))


def test_lanczos_sweep_equals_torch():
    """Many random size pairs, shrinking and growing, through the lanczos weights."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        h, w = (int(v) for v in rng.integers(1, 160, 2))
        oh, ow = (int(v) for v in rng.integers(1, 400, 2))
        img = rng.integers(0, 256, (h, w, 3), np.uint8)
        ours = _native.resize(img, ow, oh, _native.Filter.LANCZOS, ORDER, TORCH)
        assert np.array_equal(ours, torch_resize(img, ow, oh, "lanczos")), (w, h, ow, oh)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_downscale_sweep_equals_torch(mode):
    """Shrinks from 1.01x to 60x along each axis, RGB and RGBX, wide enough for every SIMD step.

    torch's weights are int16 values at a precision that grows with the scale: the row kernels
    take them in one 16-bit dot product per tap pair (two rows, vertically) at every precision
    the sweep reaches."""
    filt = {"bilinear": _native.Filter.BILINEAR, "bicubic": BICUBIC}[mode]
    rng = np.random.default_rng(23)
    for factor in (1.01, 1.1, 1.4, 1.8, 2.0, 2.5, 3.3, 4.4, 6.0, 9.5, 17.0, 31.0, 60.0):
        w = int(rng.integers(400, 1400))
        ow = max(1, int(w / factor))
        for channels in (3, 4):
            img = rng.integers(0, 256, (3, w, channels), np.uint8)
            ours = _native.resize(img, ow, 2, filt, ORDER, TORCH)
            assert np.array_equal(ours, torch_resize(img, ow, 2, mode)), (mode, w, ow, channels)
            # 45 pixels: whole 64- and 32-byte vertical steps and the bytes after them
            tall = rng.integers(0, 256, (w, 45, channels), np.uint8)
            ours = _native.resize(tall, 45, ow, filt, ORDER, TORCH)
            assert np.array_equal(ours, torch_resize(tall, 45, ow, mode)), (mode, w, ow, channels)


def test_real_photo_equals_torch(real_images):
    img = np.asarray(real_images.rgb("astronaut"))
    for ow, oh in ((308, 308), (1036, 1036), (140, 532)):
        assert np.array_equal(_native.resize(img, ow, oh, BICUBIC, ORDER, TORCH),
                              torch_resize(img, ow, oh))
        assert np.array_equal(_native.resize(img, ow, oh, _native.Filter.LANCZOS, ORDER, TORCH),
                              torch_resize(img, ow, oh, "lanczos"))


def torch_over_white(rgba: np.ndarray) -> np.ndarray:
    """transformers' torchvision convert_to_rgb on a uint8 array, in torch.

    TvF.to_dtype's scaling (times 1/255; back times 255 + 1 - 1e-3, truncated) around c * a + (1 -
    a)."""
    x = torch.from_numpy(rgba).to(torch.float32).mul_(1.0 / 255)
    blended = x[..., :3] * x[..., 3:] + (1 - x[..., 3:])
    return blended.mul(255 + 1.0 - 1e-3).to(torch.uint8).numpy()


def _pipeline():
    return _native.Pipeline(recipe=_native.LutRecipe.TORCH_FUSED_NORMALIZE, rescale=1 / 255,
                            mean=[0.48, 0.46, 0.41], std=[0.27, 0.26, 0.28],
                            dtype=_native.DType.FLOAT32, filter=BICUBIC, pass_order=ORDER,
                            patch=14, merge=2, temporal=1, resampler=TORCH)


def _run(pipe, src, rw, rh, fmt=None):
    gh, gw = -(-rh // 28) * 2, -(-rw // 28) * 2
    out = np.empty(pipe.output_elems(rw, rh, gh, gw), np.float32)
    pipe.run(src, rw, rh, gh, gw, out, fmt=fmt)
    return out


@pytest.mark.parametrize("resize", list(RESIZES))
def test_pipeline_reads_each_format_through_the_torch_resampler(resize):
    """Converted while read, then torch's resize: equal to the pipeline on the reference RGB."""
    pipe = _pipeline()
    rw, rh = RESIZES[resize]
    rgba = all_pairs(4)
    cases = [(fmt, all_pairs(c) if c > 1 else all_pairs(2)[:, :, :1].copy(), None)
             for fmt, c in CONVERTED] + [(F.RGBA_OVER_WHITE_TORCH, rgba, torch_over_white(rgba))]
    for fmt, src, ref in cases:
        want = _run(pipe, reference(fmt, src) if ref is None else ref, rw, rh)
        assert np.array_equal(_run(pipe, src, rw, rh, fmt), want), (fmt, resize)


def test_torch_format_table_equals_torch():
    rgba = all_pairs(4)
    assert np.array_equal(_native.to_rgb(rgba, F.RGBA_OVER_WHITE_TORCH), torch_over_white(rgba))


@pytest.mark.parametrize("tune", ["0", "1"])
def test_torch_resampler_goes_through_the_dispatched_kernels(tune):
    """The torch resampler runs the row kernels the ISA dispatch selects.

    In a fresh process, one torch-resampler resize of an RGB image runs exactly those kernels
    (kernel_info), whatever SMG_FAST_ISA says: the fixed order's pick (``selected``) with
    tuning off, and with tuning on the kernel its timing chose for each stage it timed (the
    fixed order's pick where it timed nothing)."""
    code = ("import json, numpy as np, smg_fast; from smg_fast import _native as n; "
            "img = np.zeros((300, 200, 3), np.uint8); "
            "n.resize(img, 97, 61, n.Filter.BICUBIC, n.PassOrder.PILLOW13, n.Resampler.TORCH); "
            "print(json.dumps(smg_fast.kernel_info()))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "SMG_FAST_TUNE": tune})
    info = json.loads(run.stdout)
    tuned = {c["stage"]: c["kernel"] for c in info["tuning"]["choices"]}
    if tune == "0":
        assert not tuned
    for stage in ("resample.vertical", "resample.horizontal"):
        assert info["ran"][stage] == [tuned.get(stage, info["selected"][stage])], (stage, info)
    assert info["ran"]["patchify"] == []
