"""smg_fast.resize must equal Pillow's Image.resize exactly.

For every filter, both pass orders, RGB and L, random content and real photos."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

R = Image.Resampling
FILTERS = [R.NEAREST, R.BOX, R.BILINEAR, R.HAMMING, R.BICUBIC, R.LANCZOS]
CONV_FILTERS = [f for f in FILTERS if f != R.NEAREST]

HYP = settings(
    deadline=None,
    max_examples=150,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

dims = st.integers(min_value=1, max_value=300)


def _random_image(seed: int, w: int, h: int, channels: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (h, w, channels) if channels == 3 else (h, w)
    # mix of smooth and noisy content so clipping and rounding are both reached
    noise = rng.integers(0, 256, size=shape, dtype=np.uint8)
    if rng.random() < 0.5:
        return noise
    ramp = np.linspace(0, 255, w, dtype=np.float64)[None, :]
    if channels == 3:
        ramp = ramp[..., None]
    smooth = np.broadcast_to(ramp, shape)
    return np.where(noise > 200, noise, smooth).astype(np.uint8)


def _pillow(arr: np.ndarray, size, resample) -> np.ndarray:
    return np.asarray(Image.fromarray(arr).resize(size, resample))


def _pillow_horizontal_first(arr, size, resample):
    """Pillow <= 12 order, built from single-axis Pillow resizes (each runs exactly one pass)."""
    im = Image.fromarray(arr)
    ow, oh = size
    return np.asarray(im.resize((ow, im.height), resample).resize((ow, oh), resample))


def _pillow_vertical_first(arr, size, resample):
    im = Image.fromarray(arr)
    ow, oh = size
    return np.asarray(im.resize((im.width, oh), resample).resize((ow, oh), resample))


def _pillow13_order(arr, size, resample):
    h, w = arr.shape[:2]
    ow, oh = size
    if (h - oh) > 0 and (h - oh) > 2 * (w - ow):
        return _pillow_vertical_first(arr, size, resample)
    return _pillow_horizontal_first(arr, size, resample)


def _assert_same(ours, ref, ctx):
    assert ours.dtype == np.uint8, ctx
    assert ours.shape == ref.shape, f"{ctx}: shape {ours.shape} != {ref.shape}"
    if not np.array_equal(ours, ref):
        d = np.abs(ours.astype(int) - ref.astype(int))
        raise AssertionError(f"{ctx}: {int((d > 0).sum())} values differ, max {int(d.max())}")


# ---------------------------------------------------------------------------------------------
# Random sizes and content vs the installed Pillow
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resample", FILTERS, ids=lambda f: f.name)
@pytest.mark.parametrize("channels", [3, 1], ids=["RGB", "L"])
@HYP
@given(iw=dims, ih=dims, ow=dims, oh=dims, seed=st.integers(0, 2**32 - 1))
def test_random_vs_pillow(smg, resample, channels, iw, ih, ow, oh, seed):
    arr = _random_image(seed, iw, ih, channels)
    ours = smg.resize(arr, (ow, oh), resample=resample)
    _assert_same(ours, _pillow(arr, (ow, oh), resample), f"{resample.name} {iw}x{ih}->{ow}x{oh}")


@pytest.mark.parametrize("resample", CONV_FILTERS, ids=lambda f: f.name)
@settings(deadline=None, max_examples=60, derandomize=True)
@given(iw=dims, ih=dims, ow=dims, oh=dims, seed=st.integers(0, 2**32 - 1))
def test_random_explicit_pass_orders(smg, resample, iw, ih, ow, oh, seed):
    """Both pass orders against Pillow-built references, whichever Pillow is installed."""
    arr = _random_image(seed, iw, ih, 3)
    ctx = f"{resample.name} {iw}x{ih}->{ow}x{oh}"
    _assert_same(
        smg.resize(arr, (ow, oh), resample=resample, pass_order="horizontal_first"),
        _pillow_horizontal_first(arr, (ow, oh), resample),
        "horizontal_first " + ctx,
    )
    _assert_same(
        smg.resize(arr, (ow, oh), resample=resample, pass_order="pillow13"),
        _pillow13_order(arr, (ow, oh), resample),
        "pillow13 " + ctx,
    )


def test_default_filter_is_bicubic(smg, real_images):
    arr = real_images.rgb_array("rocket")
    assert np.array_equal(smg.resize(arr, (300, 200)), _pillow(arr, (300, 200), R.BICUBIC))


def test_accepts_int_filter_codes(smg, real_images):
    arr = real_images.rgb_array("chelsea")
    for f in FILTERS:
        assert np.array_equal(
            smg.resize(arr, (97, 131), resample=int(f)), _pillow(arr, (97, 131), f)
        )


def test_other_pillow_filters_exact_or_refused(smg, real_images):
    """Pillow 13 adds filters beyond the six (MKS2013, MKS2021).

    Either exact or a ValueError, never a silent substitute."""
    arr = real_images.rgb_array("chelsea")
    for f in R:
        if f in FILTERS:
            continue
        try:
            out = smg.resize(arr, (97, 131), resample=f)
        except ValueError:
            continue
        _assert_same(out, _pillow(arr, (97, 131), f), f.name)


def test_same_size_is_identity(smg, real_images):
    arr = real_images.rgb_array("chelsea")
    for f in FILTERS:
        out = smg.resize(arr, (arr.shape[1], arr.shape[0]), resample=f)
        assert np.array_equal(out, arr)


def test_input_not_modified_and_strided(smg, real_images):
    base = real_images.rgb_array("coffee")
    view = base[13:301:2, 7:555:3]
    before = base.copy()
    out = smg.resize(view, (123, 77), resample=R.LANCZOS)
    assert np.array_equal(base, before)
    assert np.array_equal(out, _pillow(np.ascontiguousarray(view), (123, 77), R.LANCZOS))


# ---------------------------------------------------------------------------------------------
# Pass order
# ---------------------------------------------------------------------------------------------


def test_pillow_pass_order_reports_installed_pillow(smg):
    import PIL

    major = int(PIL.__version__.split(".")[0])
    expected = "pillow13" if major >= 13 else "horizontal_first"
    assert smg.pillow_pass_order() == expected


def test_pass_orders_differ_on_real_photo(smg, real_images):
    """640x427 -> 644x420 differs between the two orders (vertical first in 13.0)."""
    arr = real_images.rgb_array("rocket")
    assert arr.shape[:2] == (427, 640)
    size = (644, 420)
    h_first = smg.resize(arr, size, resample=R.BICUBIC, pass_order="horizontal_first")
    p13 = smg.resize(arr, size, resample=R.BICUBIC, pass_order="pillow13")
    assert not np.array_equal(h_first, p13)
    assert np.array_equal(h_first, _pillow_horizontal_first(arr, size, R.BICUBIC))
    assert np.array_equal(p13, _pillow_vertical_first(arr, size, R.BICUBIC))

    installed = smg.pillow_pass_order()
    pillow = _pillow(arr, size, R.BICUBIC)
    matching = {"horizontal_first": h_first, "pillow13": p13}[installed]
    other = {"horizontal_first": p13, "pillow13": h_first}[installed]
    assert np.array_equal(matching, pillow)
    assert not np.array_equal(other, pillow)
    assert np.array_equal(smg.resize(arr, size, resample=R.BICUBIC, pass_order=None), pillow)
    assert np.array_equal(smg.resize(arr, size, resample=R.BICUBIC), pillow)


@pytest.mark.parametrize("name,size", [("coffee", (608, 384)), ("china", (644, 420))])
def test_installed_order_on_qwen_sizes(smg, real_images, name, size):
    """Sizes Qwen's smart_resize actually produces for these photos."""
    arr = real_images.rgb_array(name)
    order = smg.pillow_pass_order()
    for f in CONV_FILTERS:
        out = smg.resize(arr, size, resample=f, pass_order=order)
        _assert_same(out, _pillow(arr, size, f), f"{name} {f.name}")


def test_bad_pass_order_rejected(smg, real_images):
    arr = real_images.rgb_array("chelsea")
    with pytest.raises(ValueError):
        smg.resize(arr, (10, 10), pass_order="vertical_sometimes")


# ---------------------------------------------------------------------------------------------
# Real photos, big factors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resample", FILTERS, ids=lambda f: f.name)
@pytest.mark.parametrize(
    "name,factor",
    [("retina", 1 / 5), ("hubble", 1 / 5), ("chelsea", 3), ("camera", 1 / 5), ("logo2", 3)],
)
def test_real_photo_big_factors(smg, real_images, name, factor, resample):
    im = real_images.open(name)
    arr = np.asarray(im.convert("L") if im.mode == "L" else im.convert("RGB"))
    h, w = arr.shape[:2]
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    _assert_same(
        smg.resize(arr, size, resample=resample),
        _pillow(arr, size, resample),
        f"{name} x{factor} {resample.name}",
    )


@pytest.mark.parametrize("name", ["astronaut", "grace_hopper", "flower"])
def test_real_photo_anisotropic(smg, real_images, name):
    """Down on one axis, up on the other, and extreme 1-pixel targets."""
    arr = real_images.rgb_array(name)
    h, w = arr.shape[:2]
    for size in [(w * 2, h // 3), (w // 4, h * 2), (1, h), (w, 1), (1, 1), (w + 1, h - 1)]:
        for f in FILTERS:
            _assert_same(
                smg.resize(arr, size, resample=f),
                _pillow(arr, size, f),
                f"{name} -> {size} {f.name}",
            )


# ---------------------------------------------------------------------------------------------
# Argument checking
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arr,size",
    [
        (np.zeros((10, 10, 3), np.float32), (5, 5)),
        (np.zeros((10, 10, 2), np.uint8), (5, 5)),
        (np.zeros((2, 10, 10, 3), np.uint8), (5, 5)),
        (np.zeros((10, 10, 3), np.uint8), (0, 5)),
        (np.zeros((10, 10, 3), np.uint8), (5, -1)),
        (np.zeros((0, 10, 3), np.uint8), (5, 5)),
    ],
    ids=["float32", "2ch", "4d", "zero_width_out", "neg_height_out", "empty_in"],
)
def test_bad_arguments_raise(smg, arr, size):
    with pytest.raises((ValueError, TypeError)):
        smg.resize(arr, size)
