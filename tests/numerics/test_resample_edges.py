"""The resampler's row kernels at their edges, against Pillow's Image.resize.

Compared with np.array_equal (against torch for the torch resampler): every width 1..40 in and out
(the AVX2 horizontal kernel computes in 32-byte chunks, falls back per byte where a chunk does not
fit, and reads no byte past a row), 3 and 4 channels and RGBX read as RGB, strong downscales (long
windows), upscales, rows ending on the last readable byte of the process's memory, and the vertical
kernel's 32-byte steps and tails. test_isa_paths reruns this file under every SMG_FAST_ISA cap."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from PIL import Image

from smg_fast import _native
from smg_fast.resample import native_pass_order

R = Image.Resampling
F = _native.Filter
FILTERS = {R.BICUBIC: F.BICUBIC, R.LANCZOS: F.LANCZOS, R.BILINEAR: F.BILINEAR, R.BOX: F.BOX,
           R.HAMMING: F.HAMMING}
HF = _native.LutRecipe.HF_RESCALE_NORMALIZE
ORDER = native_pass_order(None)  # the installed Pillow's


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(list(key))


def _image(rng: np.random.Generator, w: int, h: int, channels: int) -> np.ndarray:
    # noise with runs of 0 and 255, so clipping at both ends is reached
    img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    img[rng.random((h, w)) < 0.15] = 255
    img[rng.random((h, w)) < 0.15] = 0
    return img


def _pillow(img: np.ndarray, ow: int, oh: int, f: R) -> np.ndarray:
    """Pillow's resize, each channel on its own.

    RGB, or RGBX for 4 channels (RGBA would be premultiplied)."""
    h, w, c = img.shape
    im = Image.fromarray(img) if c == 3 else Image.frombytes("RGBX", (w, h), img.tobytes())
    return np.asarray(im.resize((ow, oh), f))


def _ours_rgb_from_rgbx(img: np.ndarray, ow: int, oh: int, f: F) -> np.ndarray:
    """RGBX in, RGB out (the horizontal kernel drops the pad byte).

    The pipeline with an identity normalization and 1-pixel patches returns the resized pixels as
    float32 values."""
    pipe = _native.Pipeline(recipe=HF, rescale=1.0, mean=[0, 0, 0], std=[1, 1, 1],
                            dtype=_native.DType.FLOAT32, filter=f, pass_order=ORDER, patch=1,
                            merge=1, temporal=1)
    out = np.full(oh * ow * 3, -1, np.float32)
    pipe.run(img, ow, oh, oh, ow, out, 0, fmt=_native.PixelFormat.RGBX)
    return out.reshape(oh, ow, 3).astype(np.uint8)


def _check(img: np.ndarray, ow: int, oh: int, f: R) -> None:
    ref = _pillow(img, ow, oh, f)
    ctx = f"{f.name} {img.shape[1]}x{img.shape[0]}x{img.shape[2]} -> {ow}x{oh}"
    ours = _native.resize(img, ow, oh, FILTERS[f], ORDER)
    assert np.array_equal(ours, ref), ctx
    if img.shape[2] == 4:
        rgb = _ours_rgb_from_rgbx(img, ow, oh, FILTERS[f])
        assert np.array_equal(rgb, ref[..., :3]), "RGBX->RGB " + ctx


@pytest.mark.parametrize("f", list(FILTERS), ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 4])
def test_every_small_width(f, channels):
    """Horizontal pass only, every width 1..40 to every width 1..40."""
    for iw in range(1, 41):
        img = _image(_rng(iw, channels, f), iw, 2, channels)
        for ow in range(1, 41):
            _check(img, ow, 2, f)


@pytest.mark.parametrize("f", list(FILTERS), ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("iw,ow", [
    (4000, 97), (4000, 1000), (3001, 1000), (2000, 333), (1000, 13), (517, 41), (300, 149),
    (300, 101), (299, 100), (1000, 499), (1000, 334), (1000, 251), (997, 199),
    (1920, 1056), (1920, 768), (1000, 700), (4000, 1932), (4000, 1300), (1000, 250), (1003, 245),
    (709, 248), (2031, 710), (3875, 1354), (1931, 794), (1216, 500)])
def test_downscales(f, channels, iw, ow):
    """Long windows: the packed, per-half and whole-pixel layouts and their edges.

    Ratios 1.4-4: AVX-512 groups read from one window, from one per half, or pixel by pixel
    (RGBX 709 -> 248 BICUBIC, 1931 -> 794 LANCZOS and the like mix all three in one plan)."""
    img = _image(_rng(iw, ow, channels, f), iw, 3, channels)
    _check(img, ow, 3, f)


@pytest.mark.parametrize("f", list(FILTERS), ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("iw,ow", [(13, 1000), (40, 1932), (1920, 1932), (7, 40), (100, 101),
                                   (101, 333), (640, 644)])
def test_upscales(f, channels, iw, ow):
    img = _image(_rng(iw, ow, channels, f), iw, 3, channels)
    _check(img, ow, 3, f)


@pytest.mark.parametrize("f", list(FILTERS), ids=lambda f: f.name)
def test_vertical_steps_and_tails(f):
    """Vertical pass only.

    Rows of 1..40 pixels (the 32-byte steps and the bytes after them) between heights 1..40, and a
    long window."""
    for ih, oh in [(1, 7), (7, 1), (2, 3), (13, 40), (40, 13), (39, 40), (40, 39), (31, 5),
                   (5, 31)]:
        for w in (1, 10, 11, 21, 32, 33, 40):
            img = _image(_rng(ih, oh, w, f), w, ih, 3)
            _check(img, w, oh, f)
    img = _image(_rng(2, f), 37, 3000, 3)
    _check(img, 37, 97, f)


# -- the last row of a buffer that ends on the last readable byte --------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


@pytest.fixture
def at_page_end():
    """Copies an image so that its last byte is followed by an unreadable page.

    A kernel that reads past the last row crashes the test."""
    keep = []

    def place(img: np.ndarray) -> np.ndarray:
        page = mmap.PAGESIZE
        span = -(-img.nbytes // page) * page
        mm = mmap.mmap(-1, span + page)
        whole = np.frombuffer(mm, np.uint8)
        guard = whole.ctypes.data + span
        if _libc.mprotect(guard, page, 0) != 0:  # PROT_NONE
            pytest.skip(f"mprotect failed (errno {ctypes.get_errno()})")
        view = whole[span - img.nbytes:span].reshape(img.shape)
        view[...] = img
        keep.append((mm, whole))
        return view

    yield place
    for _mm, whole in keep:
        _libc.mprotect(whole.ctypes.data + whole.nbytes - mmap.PAGESIZE, mmap.PAGESIZE, 3)


@pytest.mark.parametrize("f", list(FILTERS), ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("size", [(1, 5, 3, 7), (5, 2, 40, 2), (40, 3, 7, 3), (37, 9, 1932, 11),
                                  (1920, 4, 1932, 5), (4000, 3, 97, 2), (333, 7, 333, 3),
                                  (6, 400, 40, 5), (1000, 2, 499, 2)],
                         ids=lambda s: "{}x{}-{}x{}".format(*s))
def test_last_row_ends_at_unreadable_page(at_page_end, f, channels, size):
    iw, ih, ow, oh = size
    img = at_page_end(_image(_rng(iw, ih, ow, oh, channels), iw, ih, channels))
    assert img.ctypes.data + img.nbytes == img.base.ctypes.data + img.base.nbytes - mmap.PAGESIZE
    _check(img, ow, oh, f)


@pytest.mark.parametrize("f", [R.BICUBIC, R.LANCZOS], ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 4])
def test_slack_before_each_row_at_unreadable_page(at_page_end, f, channels):
    """Rows with stride slack at their start, the last one ending at an unreadable page, are exact.

    A view whose rows skip bytes at their start (a crop's right part; the PNG decoder's rows after
    their filter bytes): stride slack, yet nothing after the last row's last pixel."""
    for iw, ih, ow, oh in [(40, 30, 17, 30), (7, 3, 40, 5), (1920, 2, 1932, 3), (1, 4, 3, 4)]:
        full = at_page_end(_image(_rng(iw, ih, channels, 9), iw + 1, ih, channels))
        img = full[:, 1:]
        assert img.ctypes.data + img[-1].nbytes + (ih - 1) * img.strides[0] == (
            full.ctypes.data + full.nbytes)
        _check(img, ow, oh, f)


def test_torch_resampler_edges(at_page_end):
    """The torch resampler at the same edges equals torch itself.

    Its weights (int16 at a lower precision, scaled to 22 bits) go through the same kernels."""
    torch = pytest.importorskip("torch")

    def torch_resize(img, ow, oh):
        t = torch.from_numpy(np.array(img)).permute(2, 0, 1)[None]
        out = torch.nn.functional.interpolate(t, size=(oh, ow), mode="bicubic", antialias=True,
                                              align_corners=False)
        return out[0].permute(1, 2, 0).contiguous().numpy()

    for channels in (3, 4):
        for iw, ih, ow, oh in [(1920, 3, 1932, 4), (40, 5, 13, 5), (13, 5, 40, 5), (4000, 3, 97, 2),
                               (2, 9, 40, 33), (37, 3, 36, 3), (300, 40, 101, 7)]:
            img = at_page_end(_image(_rng(iw, ow, channels, 7), iw, ih, channels))
            ours = _native.resize(img, ow, oh, F.BICUBIC, ORDER, _native.Resampler.TORCH)
            assert np.array_equal(ours, torch_resize(img, ow, oh)), (channels, iw, ih, ow, oh)
