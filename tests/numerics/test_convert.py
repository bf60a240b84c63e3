"""Mode conversions in the native core (PixelFormat).

Every (value, alpha) pair against the real references (Pillow's convert and alpha_composite,
transformers' convert_to_rgb on arrays), through every resampler pass, end to end against the
processors' oracles, and the memory they save."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from PIL import Image
from transformers.image_transforms import convert_to_rgb

from smg_fast import _native
from smg_fast.imaging.media import open_image
from smg_fast.testing.oracles import HUB_KIMI, kimi_upstream

F = _native.PixelFormat
_V = np.arange(256, dtype=np.uint8)
VALUE, ALPHA = np.meshgrid(_V, _V)  # every (value, alpha) pair: rows alpha, columns value


def all_pairs(channels: int) -> np.ndarray:
    """A 256 x 256 image holding every (value, alpha) pair.

    For colour, the three channels hold the value in three different orders so each channel sees all
    65536 pairs."""
    if channels == 2:
        return np.ascontiguousarray(np.stack([VALUE, ALPHA], axis=2))
    colour = [VALUE, 255 - VALUE, VALUE[:, ::-1] ^ 0x5A]
    return np.ascontiguousarray(np.stack([*colour, ALPHA], axis=2).astype(np.uint8))


def _over_white(rgba: Image.Image) -> np.ndarray:
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))


def reference(fmt, arr: np.ndarray) -> np.ndarray:
    """What the reference makes of arr (packed RGB)."""
    if fmt == F.GRAY:
        return np.asarray(Image.fromarray(arr[:, :, 0], "L").convert("RGB"))
    if fmt == F.GRAY_ALPHA_DROP:
        return np.asarray(Image.fromarray(arr, "LA").convert("RGB"))
    if fmt == F.GRAY_ALPHA_OVER_WHITE_PILLOW:
        return _over_white(Image.fromarray(arr, "LA").convert("RGBA"))
    if fmt == F.RGBX:
        return np.asarray(Image.fromarray(arr, "RGBA").convert("RGB"))
    if fmt == F.RGBA_OVER_WHITE_PILLOW:
        return _over_white(Image.fromarray(arr, "RGBA"))
    if fmt == F.RGBA_OVER_WHITE_NUMPY:
        return convert_to_rgb(arr, return_numpy=True, input_data_format="channels_last")
    raise KeyError(fmt)


CONVERTED = [(F.GRAY, 1), (F.GRAY_ALPHA_DROP, 2), (F.GRAY_ALPHA_OVER_WHITE_PILLOW, 2),
             (F.RGBX, 4), (F.RGBA_OVER_WHITE_PILLOW, 4), (F.RGBA_OVER_WHITE_NUMPY, 4)]


def _source(channels: int) -> np.ndarray:
    if channels == 1:
        return np.ascontiguousarray(np.stack([VALUE, ALPHA], axis=2).reshape(256, 512, 1))
    return all_pairs(channels)


@pytest.mark.parametrize("fmt,channels", CONVERTED, ids=lambda v: getattr(v, "name", str(v)))
def test_every_value_alpha_pair_equals_the_reference(fmt, channels):
    src = _source(channels)
    ref = reference(fmt, src)
    assert ref.dtype == np.uint8 and ref.shape == (*src.shape[:2], 3)
    assert np.array_equal(_native.to_rgb(src, fmt), ref)


def _pipeline(order, filt=_native.Filter.BICUBIC):
    return _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                            mean=[0.48, 0.46, 0.41], std=[0.27, 0.26, 0.28],
                            dtype=_native.DType.FLOAT32, filter=filt, pass_order=order,
                            patch=14, merge=2, temporal=1)


def _run(pipe, src, rw, rh, fmt=None):
    gh, gw = -(-rh // 28) * 2, -(-rw // 28) * 2
    out = np.empty(pipe.output_elems(rw, rh, gh, gw), np.float32)
    pipe.run(src, rw, rh, gh, gw, out, fmt=fmt)
    return out


# Every Resizer mode: same size (copy), width only, height only, horizontal then vertical,
# vertical first (Pillow 13 when the height shrinks by more than twice the width), upscaling.
RESIZES = {"copy": (256, 256), "h_only": (98, 256), "v_only": (256, 70), "both": (140, 196),
           "tall_shrink": (250, 56), "upscale": (301, 283)}


@pytest.mark.parametrize("order", [_native.PassOrder.HORIZONTAL_FIRST, _native.PassOrder.PILLOW13])
@pytest.mark.parametrize("resize", list(RESIZES))
def test_pipeline_reads_each_format_as_its_reference(order, resize):
    """The pipeline on the unconverted image equals it on the reference's RGB, in every pass."""
    pipe = _pipeline(order)
    rw, rh = RESIZES[resize]
    for fmt, channels in CONVERTED:
        src = all_pairs(channels) if channels > 1 else VALUE[:, :, None].copy()
        want = _run(pipe, reference(fmt, src), rw, rh)
        assert np.array_equal(_run(pipe, src, rw, rh, fmt), want), (fmt, resize)


def test_nearest_reads_each_format_as_its_reference():
    pipe = _pipeline(_native.PassOrder.PILLOW13, _native.Filter.NEAREST)
    for fmt, channels in CONVERTED:
        src = all_pairs(channels) if channels > 1 else VALUE[:, :, None].copy()
        for rw, rh in ((256, 256), (97, 301), (400, 45)):
            want = _run(pipe, reference(fmt, src), rw, rh)
            assert np.array_equal(_run(pipe, src, rw, rh, fmt), want), (fmt, rw, rh)


def test_run_refuses_a_format_that_does_not_fit():
    pipe = _pipeline(_native.PassOrder.PILLOW13)
    dst = np.full(pipe.output_elems(28, 28, 2, 2), 7, np.float32)
    rgba = np.zeros((28, 28, 4), np.uint8)
    with pytest.raises(ValueError, match="reads 2 channels"):
        pipe.run(rgba, 28, 28, 2, 2, dst, fmt=F.GRAY_ALPHA_DROP)
    with pytest.raises(ValueError, match="explicit fmt"):
        pipe.run(rgba[:, :, :2].copy(), 28, 28, 2, 2, dst)
    with pytest.raises(ValueError, match="unknown pixel format"):
        pipe.run(rgba, 28, 28, 2, 2, dst, fmt=F(99))
    with pytest.raises(ValueError, match="reads 4 channels"):
        _native.to_rgb(rgba[:, :, :3].copy(), F.RGBA_OVER_WHITE_PILLOW)
    assert np.all(dst == 7)


# ---------------------------------------------------------------------------------------------
# End to end: the processors against their oracles
# ---------------------------------------------------------------------------------------------


def _crops(img: Image.Image) -> list[Image.Image]:
    """Odd sizes.

    A wide one, a tall one the Pillow 13 order resizes vertically first, and one smaller than
    min_pixels (upscaled)."""
    return [img.crop((3, 5, 3 + 301, 5 + 177)), img.crop((7, 0, 7 + 61, 297)),
            img.crop((11, 13, 11 + 47, 13 + 39))]


def _pil_inputs(real_images) -> dict[str, Image.Image]:
    return {"L": real_images.open("camera"), "LA": real_images.mode_image("LA"),
            "RGBA": real_images.mode_image("RGBA"), "RGBA_logo2": real_images.open("logo2")}


QWEN_KW = dict(min_pixels=56 * 56, max_pixels=28 * 28 * 40)


@pytest.mark.parametrize("mode", ["L", "LA", "RGBA", "RGBA_logo2"])
def test_qwen_pil_modes_equal_transformers(mode, qwen_family, real_images, ours, hf_qwen,
                                           hf_run, check):
    for img in _crops(_pil_inputs(real_images)[mode]):
        assert img.mode == mode.split("_")[0]
        ref_pv, ref_grid = hf_run(hf_qwen(qwen_family, **QWEN_KW), img.copy())
        check(ours(qwen_family, **QWEN_KW)(img, return_tensors="np"), ref_pv, ref_grid)


def _numpy_inputs(real_images) -> dict[str, np.ndarray]:
    rgba = np.asarray(real_images.mode_image("RGBA"))
    grey = np.asarray(real_images.open("camera"))
    return {"hw": grey[:301, :177], "hw1_view": grey[:177, :301, None],
            "hw4": np.ascontiguousarray(rgba[:177, :301]),
            "hw4_transposed": rgba[:61, :297].transpose(1, 0, 2)}


@pytest.mark.parametrize("kind", ["hw", "hw1_view", "hw4", "hw4_transposed"])
def test_qwen_numpy_equals_transformers(kind, qwen_family, real_images, ours, hf_qwen, hf_run,
                                        check):
    arr = _numpy_inputs(real_images)[kind]
    ref_in = np.ascontiguousarray(arr[:, :, None] if arr.ndim == 2 else arr)
    ref_pv, ref_grid = hf_run(hf_qwen(qwen_family, **QWEN_KW), ref_in,
                              input_data_format="channels_last")
    before = arr.copy()
    check(ours(qwen_family, **QWEN_KW)(arr, return_tensors="np"), ref_pv, ref_grid)
    assert np.array_equal(arr, before)


@pytest.mark.parametrize("mode", ["L", "LA", "RGBA"])
def test_kimi_pil_modes_equal_upstream(mode, real_images, ours, check_kimi):
    kimi = ours("kimi_k25", in_patch_limit=300)
    for img in _crops(_pil_inputs(real_images)[mode]):
        ref_pv, ref_grid = kimi_upstream(img, _kimi_cfg())
        check_kimi(kimi(img, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("kind", ["hw", "hw1_view", "hw4", "hw4_transposed"])
def test_kimi_numpy_equals_upstream(kind, real_images, ours, check_kimi):
    arr = _numpy_inputs(real_images)[kind]
    dense = np.ascontiguousarray(arr)
    img = Image.fromarray(dense[:, :, 0] if dense.ndim == 3 and dense.shape[2] == 1 else dense)
    ref_pv, ref_grid = kimi_upstream(img, _kimi_cfg())
    check_kimi(ours("kimi_k25", in_patch_limit=300)(arr, return_tensors="np"), ref_pv, ref_grid)


def _kimi_cfg():
    return dict(HUB_KIMI, in_patch_limit=300)


@pytest.mark.parametrize("family", ["qwen2_vl", "kimi_k25"])
@pytest.mark.parametrize("order", ["horizontal_first", "pillow13"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_every_dtype_and_pass_order_equals_the_converted_rgb(family, order, dtype, real_images,
                                                            ours):
    """Converted while read == converted first by the reference, then processed as RGB."""
    hf = family != "kimi_k25"
    kw = dict(QWEN_KW) if hf else dict(in_patch_limit=300)
    proc = ours(family, pass_order=order, **kw)
    rgba = real_images.mode_image("RGBA")
    la = real_images.mode_image("LA")
    for img in (*_crops(rgba), *_crops(la), *_crops(real_images.open("camera"))):
        if hf and "A" in img.getbands():
            ref = _over_white(img.convert("RGBA"))
        else:
            ref = np.asarray(img.convert("RGB"))
        got = proc(img, return_tensors="np", dtype=dtype)["pixel_values"]
        want = proc(np.ascontiguousarray(ref), return_tensors="np", dtype=dtype)["pixel_values"]
        assert np.array_equal(got, want), (family, order, dtype, img.mode, img.size)
    arr = np.ascontiguousarray(np.asarray(rgba)[:97, :183])
    want_rgb = (convert_to_rgb(arr, return_numpy=True, input_data_format="channels_last") if hf
                else np.ascontiguousarray(arr[:, :, :3]))
    got = proc(arr, return_tensors="np", dtype=dtype)["pixel_values"]
    assert np.array_equal(got, proc(want_rgb, return_tensors="np", dtype=dtype)["pixel_values"])


# ---------------------------------------------------------------------------------------------
# What decoding keeps: the image's own memory, no converted copy
# ---------------------------------------------------------------------------------------------


def test_numpy_inputs_are_read_in_place():
    rgba = np.zeros((30, 40, 4), np.uint8)
    px = open_image(0, rgba, hf=True, max_pixels=None).decode()
    assert px.fmt == F.RGBA_OVER_WHITE_NUMPY and np.shares_memory(px.array, rgba)
    px = open_image(0, rgba, hf=False, max_pixels=None).decode()
    assert px.fmt == F.RGBX and np.shares_memory(px.array, rgba)
    grey = np.zeros((30, 40), np.uint8)
    px = open_image(0, grey[:, :, None], hf=True, max_pixels=None).decode()
    assert px.fmt == F.GRAY and np.shares_memory(px.array, grey)
    # not packed: the one case that copies
    px = open_image(0, rgba.transpose(1, 0, 2), hf=True, max_pixels=None).decode()
    assert px.array.shape == (40, 30, 4) and not np.shares_memory(px.array, rgba)


@pytest.mark.parametrize("hf,mode,fmt", [
    (True, "RGBA", F.RGBA_OVER_WHITE_PILLOW), (True, "LA", F.GRAY_ALPHA_OVER_WHITE_PILLOW),
    (True, "L", F.GRAY), (False, "RGBA", F.RGBX), (False, "LA", F.GRAY_ALPHA_DROP),
    (False, "L", F.GRAY)])
def test_pil_modes_are_read_natively(hf, mode, fmt):
    img = Image.new(mode, (33, 21))
    px = open_image(0, img, hf=hf, max_pixels=None).decode()
    assert px.fmt == fmt and px.array.shape[:2] == (21, 33)


def test_colour_key_keeps_pillow():
    img = Image.new("RGB", (8, 8), (1, 2, 3))
    img.info["transparency"] = (1, 2, 3)
    px = open_image(0, img, hf=True, max_pixels=None).decode()
    assert px.fmt in (F.RGB, F.RGBX) and np.all(px.to_rgb()[:, :, :3] == 255)


def _peak_traced(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", [(900, 1100, 4), (900, 1100, 1), (900, 1100)])
def test_numpy_conversion_allocates_no_full_size_temporary(shape, ours):
    """Converting a NumPy image allocates nothing of the image's size in Python.

    NumPy's allocations are traced: a float64 blend (8 bytes per value) or np.repeat would make
    several full-size arrays.
    """
    proc = ours("qwen2_vl")
    arr = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    proc(arr)  # warm: pipelines, pools
    peak = _peak_traced(lambda: proc(arr))
    assert peak < shape[0] * shape[1] // 4, f"peak {peak} bytes for a {shape} image"
