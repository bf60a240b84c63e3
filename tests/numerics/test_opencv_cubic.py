"""resize_opencv_cubic against cv2.resize(INTER_CUBIC) in the vLLM venv (OpenCV 5.1, IPP off).

Random float32 and uint8 images with 1, 3 and 4 channels, upscales, downscales, one-pixel sides,
a same-size copy, row widths on both sides of OpenCV's four-float vector loop and 40 seeded
random size pairs, compared with
np.array_equal; the fused normalize against mistral_common's own normalize. Bad arguments raise
typed errors before anything is allocated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.engine_common import engine_python_or_fail
from support.mistral_common_runner import run_mistral_common

from smg_fast import _native

# (src h, src w, dst h, dst w)
SIZES = [(37, 53, 64, 80), (300, 200, 97, 131), (640, 480, 1024, 768), (8, 8, 16, 16),
         (1, 7, 16, 16), (5, 1, 3, 32), (1, 1, 4, 4), (2, 3, 1, 1), (7, 9, 7, 9), (7, 9, 7, 20),
         (100, 3, 50, 1), (3, 4, 1000, 2), (513, 777, 1024, 768), (1080, 1920, 576, 1024),
         (20, 37, 37, 5), (20, 37, 37, 7), (1, 2, 1, 3), (4000, 25, 1024, 7)]
_RNG = np.random.default_rng(25)
# seeded random sizes, 1..300 per side, up and down independently per axis
RANDOM_SIZES = [tuple(int(v) for v in _RNG.integers(1, 301, 4)) for _ in range(40)]
CHANNELS = (1, 3, 4)
CASES = ([(s, c, kind) for s in SIZES for c in CHANNELS for kind in ("f32", "u8")]
         + [(s, 3, kind) for s in RANDOM_SIZES for kind in ("f32", "u8")])
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def source(size: tuple[int, int, int, int], channels: int, kind: str) -> np.ndarray:
    """A seeded random (H, W, C) image: floats over [-20, 280) or uint8."""
    h, w = size[:2]
    rng = np.random.default_rng(h * 7919 + w * 31 + channels)
    if kind == "u8":
        return rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    return (rng.random((h, w, channels)) * 300 - 20).astype(np.float32)


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def cv2_results(vllm_python, tmp_path_factory) -> dict:
    python: Path = vllm_python
    jobs = [{"resize": source(s, c, k).astype(np.float32), "size": (s[3], s[2])}
            for s, c, k in CASES]
    norm_src = source((61, 45, 0, 0), 3, "f32")
    jobs.append({"normalize": norm_src})
    outs = run_mistral_common(python, tmp_path_factory.mktemp("opencv_cubic"), jobs)
    return {"resize": dict(zip(CASES, outs[:-1], strict=True)), "normalize": (norm_src, outs[-1])}


@pytest.mark.parametrize("size,channels,kind", CASES)
def test_equals_cv2(size, channels, kind, cv2_results):
    ref = cv2_results["resize"][(size, channels, kind)]
    got = _native.resize_opencv_cubic(source(size, channels, kind), size[3], size[2])
    if ref.ndim == 2:  # cv2 drops a single channel
        ref = ref[:, :, None]
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert np.array_equal(got, ref), np.abs(got - ref).max()


def test_two_dimensional_input_keeps_its_shape(cv2_results):
    size = SIZES[0]
    src = source(size, 1, "f32")
    got = _native.resize_opencv_cubic(src[:, :, 0].copy(), size[3], size[2])
    ref = cv2_results["resize"][(size, 1, "f32")]
    assert got.shape == ref.shape and np.array_equal(got, ref)


def test_normalize_equals_mistral_common(cv2_results):
    """Same size (a copy), then mistral_common's float32 divide, subtract and divide."""
    src, ref = cv2_results["normalize"]
    h, w = src.shape[:2]
    got = _native.resize_opencv_cubic(src, w, h, CLIP_MEAN, CLIP_STD)
    assert got.shape == ref.shape == (3, h, w) and got.dtype == ref.dtype == np.float32
    assert np.array_equal(got, ref)


def test_normalize_fuses_what_numpy_does_after_the_resize():
    src = source((33, 47, 0, 0), 3, "u8")
    plain = _native.resize_opencv_cubic(src, 70, 21)
    fused = _native.resize_opencv_cubic(src, 70, 21, CLIP_MEAN, CLIP_STD)
    want = np.divide(plain, np.float32(255), dtype=np.float32)
    want -= np.asarray(CLIP_MEAN, dtype=np.float32)
    want /= np.asarray(CLIP_STD, dtype=np.float32)
    assert np.array_equal(fused, want.transpose(2, 0, 1))


@pytest.mark.parametrize("bad,exc,match", [
    (np.zeros((4, 4, 3), np.float64), TypeError, "uint8 or float32"),
    (np.zeros((4, 4, 3), np.int16), TypeError, "uint8 or float32"),
    (np.arange(48, dtype=">f4").reshape(4, 4, 3), TypeError, "uint8 or float32"),
    (np.zeros((4,), np.float32), ValueError, "shape"),
    (np.zeros((0, 4, 3), np.float32), ValueError, "empty"),
    (np.zeros((4, 4, 5), np.float32), ValueError, "channels"),
    (np.zeros((4, 6, 3), np.float32)[:, ::2], ValueError, "C-contiguous"),
])
def test_bad_sources_raise(bad, exc, match):
    with pytest.raises(exc, match=match):
        _native.resize_opencv_cubic(bad, 4, 4)


@pytest.mark.parametrize("kwargs,match", [
    ({"out_w": 0, "out_h": 4}, "positive"),
    ({"out_w": 4, "out_h": -1}, "positive"),
    ({"out_w": 4, "out_h": 1 << 21}, "2\\^20"),
    ({"out_w": 4, "out_h": 4, "mean": CLIP_MEAN}, "both"),
    ({"out_w": 4, "out_h": 4, "mean": (0.5,), "std": (0.5,)}, "one value per channel"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _native.resize_opencv_cubic(np.zeros((4, 4, 3), np.float32), **kwargs)


@pytest.mark.parametrize("size", [SIZES[0], SIZES[4], SIZES[8]])
def test_channels_reads_the_first_of_each_pixel(size):
    """channels=3 on an (H, W, 4) array (Pillow's RGBX memory) is the RGB array's resize."""
    rgbx = source(size, 4, "u8")
    want = _native.resize_opencv_cubic(np.ascontiguousarray(rgbx[:, :, :3]), size[3], size[2],
                                       CLIP_MEAN, CLIP_STD)
    got = _native.resize_opencv_cubic(rgbx, size[3], size[2], CLIP_MEAN, CLIP_STD, channels=3)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("channels", [-1, 5])
def test_bad_channel_counts_raise(channels):
    with pytest.raises(ValueError, match="channels must be"):
        _native.resize_opencv_cubic(np.zeros((4, 4, 4), np.uint8), 4, 4, channels=channels)


def test_non_native_byte_order_is_refused():
    """A byte-swapped float32 array would be read as native floats: refused, not misread."""
    src = source(SIZES[0], 3, "f32")
    with pytest.raises(TypeError, match="uint8 or float32"):
        _native.resize_opencv_cubic(src.astype(src.dtype.newbyteorder()), 8, 8)
