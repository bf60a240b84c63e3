"""encoding="uint8+lut": the resized uint8 patches and a 3 x 256 table expand to the full output.

For every family, backend and float dtype, on real images (encoded bytes, which take the
overlapped JPEG path, and arrays), ``smg_fast.expand`` of the compact output equals the full
path's output bit for bit; the native expansion equals the table lookup written out in NumPy;
calls whose images need different tables, and families marked inexact, are refused."""

from __future__ import annotations

import numpy as np
import pytest

import smg_fast
from smg_fast import CompactFormatError, CompactTensor, expand
from smg_fast.processors.registry import get_family

DTYPES = ("float32", "bfloat16", "float16")
CASES = [(name, backend) for name in smg_fast.FAMILIES for backend in get_family(name).backends]
# a small budget keeps the families with a pixel budget quick; Gemma 3 is fixed-size (896)
SMALL = {"min_pixels": 3136, "max_pixels": 200_000}
# families whose output the format does not describe (Pixtral: whole-image channel runs;
# Phi-4-multimodal: its global image is resized in float32)
REFUSED = {"pixtral", "phi4_multimodal"}


def _load(name: str, backend: str) -> smg_fast.Processor:
    proc = smg_fast.load_processor(name, backend=backend)
    if proc.zero_rows:  # literal zero padding: carried where pixel 0 normalizes to +0.0
        proc = smg_fast.load_processor(name, backend=backend, image_mean=[0.0] * 3)
    if "min_pixels" in get_family(name).options and proc.per_request_pixels:
        proc = smg_fast.load_processor(name, backend=backend, **SMALL)
    return proc


def _by_table(c: CompactTensor) -> np.ndarray:
    """The table lookup written out: element i is lut[(i // run) % 3, codes[i]]."""
    codes = np.asarray(c.codes).reshape(-1, 3, c.run)
    return np.asarray(c.lut)[np.arange(3)[None, :, None], codes].reshape(c.codes.shape)


@pytest.mark.parametrize("name,backend", CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_expand_is_the_full_output(name, backend, real_images):
    proc = _load(name, backend)
    for image in (real_images.bytes("chelsea"), real_images.rgb_array("rocket")):
        for dtype in DTYPES:
            if name in REFUSED:
                with pytest.raises(CompactFormatError, match="not a table"):
                    proc(image, dtype=dtype, encoding="uint8+lut")
                continue
            full = proc(image, dtype=dtype)
            compact = proc(image, dtype=dtype, encoding="uint8+lut")
            c = compact["pixel_values"]
            assert isinstance(c, CompactTensor) and c.dtype == dtype
            assert np.asarray(c.codes).dtype == np.uint8 and c.shape == full["pixel_values"].shape
            got = expand(c)
            assert got.dtype == full["pixel_values"].dtype
            assert np.array_equal(got.view(np.uint8), full["pixel_values"].view(np.uint8))
            assert np.array_equal(_by_table(c).view(np.uint8), got.view(np.uint8))
            for key in set(full) - {"pixel_values"}:
                assert np.array_equal(compact[key], full[key]), key
            # the codes are the uint8 output; float32 is 4x their bytes
            assert np.array_equal(c.codes, proc(image, dtype="uint8")["pixel_values"])


def test_padding_crops_overrides_and_float_images(real_images):
    """Kimi's zero padding, Gemma 3's pan-and-scan crops, call-time mean/std, [0, 1] floats."""
    img = real_images.rgb_array("coffee")
    calls = [
        (smg_fast.load_processor("kimi_k25"), real_images.rgb_array("logo"), {}),
        (smg_fast.load_processor("gemma3"), img[:, :, :],
         {"do_pan_and_scan": True, "pan_and_scan_min_crop_size": 64,
          "pan_and_scan_max_num_crops": 3, "pan_and_scan_min_ratio_to_activate": 1.2}),
        (_load("qwen2_vl", "pil"), img, {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9] * 3}),
        (_load("qwen2_vl", "pil"), img.astype(np.float32) / 255, {"do_rescale": False}),
        (_load("glm4v", "torchvision"), [img, real_images.rgb_array("chelsea")], {}),
    ]
    for proc, image, opts in calls:
        for dtype in DTYPES:
            full = proc(image, dtype=dtype, **opts)["pixel_values"]
            c = proc(image, dtype=dtype, encoding="uint8+lut", **opts)["pixel_values"]
            assert np.array_equal(expand(c).view(np.uint8), full.view(np.uint8))


def test_channel_last_tables_and_zero_rows(real_images):
    """Gemma 4's interleaved channels take per-channel tables; its zero rows need table[c][0]=+0."""
    proc = smg_fast.load_processor("gemma4")
    small = real_images.rgb_array("logo")  # far under max_patches: most rows are zero padding
    assert proc.channel_run() == 1
    # zero mean keeps pixel 0 at +0.0 while the three channels' tables differ
    opts = {"do_normalize": True, "image_mean": [0.0] * 3, "image_std": [0.5, 0.25, 0.125]}
    for dtype in DTYPES:
        full = proc(small, dtype=dtype, **opts)["pixel_values"]
        c = proc(small, dtype=dtype, encoding="uint8+lut", **opts)["pixel_values"]
        assert not np.array_equal(c.lut[0], c.lut[1])
        assert np.array_equal(expand(c).view(np.uint8), full.view(np.uint8))
        assert np.array_equal(_by_table(c).view(np.uint8), full.view(np.uint8))
    for opts in ({"do_normalize": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
                 {"do_normalize": True, "image_mean": [0.0] * 3, "image_std": [-1.0] * 3}):
        with pytest.raises(CompactFormatError, match="pads with zero rows"):
            proc(small, encoding="uint8+lut", **opts)
    # the call's options decide: a processor normalizing off zero is refused, its call without
    # normalization is carried
    off_zero = smg_fast.load_processor("gemma4", do_normalize=True, image_mean=[0.5] * 3,
                                       image_std=[0.5] * 3)
    with pytest.raises(CompactFormatError, match="pads with zero rows"):
        off_zero(small, encoding="uint8+lut")
    c = off_zero(small, encoding="uint8+lut", do_normalize=False)["pixel_values"]
    assert np.array_equal(expand(c), proc(small)["pixel_values"])


def test_expand_into_out_and_its_checks():
    rng = np.random.default_rng(5)
    for run, rows in ((1, 7), (3, 2), (392, 5), (20_000, 9)):
        codes = rng.integers(0, 256, (rows, 3 * run), dtype=np.uint8)
        for table in (rng.standard_normal((3, 256)).astype(np.float32),
                      rng.integers(0, 1 << 16, (3, 256), dtype=np.uint16)):
            c = CompactTensor(codes, table, "float32" if table.itemsize == 4 else "bfloat16", run)
            want = _by_table(c)
            assert np.array_equal(expand(c), want)
            out = np.empty(codes.size, table.dtype)
            assert np.array_equal(expand(c, out=out), want) and np.array_equal(out, want.ravel())
    c = CompactTensor(np.zeros((2, 6), np.uint8), np.zeros((3, 256), np.float32), "float32", 2)
    with pytest.raises(ValueError, match="out must be"):
        expand(c, out=np.empty(11, np.float32))
    with pytest.raises(ValueError, match="out must be"):
        expand(c, out=np.empty(12, np.float64))
    with pytest.raises(ValueError, match="runs of 5"):
        CompactTensor(np.zeros((2, 6), np.uint8), np.zeros((3, 256), np.float32), "float32", 5)
    with pytest.raises(ValueError, match="3 x 256"):
        CompactTensor(np.zeros((2, 6), np.uint8), np.zeros((3, 255), np.float32), "float32", 2)
    with pytest.raises(ValueError, match="compact dtype"):
        CompactTensor(np.zeros((2, 6), np.uint8), np.zeros((3, 256), np.uint8), "uint8", 2)
    with pytest.raises(ValueError, match="uint8"):
        expand(CompactTensor(np.zeros((2, 6), np.int8), np.zeros((3, 256), np.float32),
                             "float32", 2))
    with pytest.raises(ValueError, match="run must be positive"):
        smg_fast._native.expand_lut(np.zeros(6, np.uint8), np.zeros((3, 256), np.float32), 4,
                                    np.empty(6, np.float32))


def test_refusals(real_images, monkeypatch):
    img = real_images.rgb_array("chelsea")
    proc = _load("qwen2_vl", "pil")
    with pytest.raises(ValueError, match="unsupported encoding"):
        proc(img, encoding="uint4")
    with pytest.raises(ValueError, match="carries float32"):
        proc(img, dtype="uint8", encoding="uint8+lut")
    # without rescaling, pixel levels and [0, 1] floats (divided by 255 after the resize)
    # normalize with two tables: one call cannot carry both
    mixed = [img, img.astype(np.float32) / 255]
    assert proc(mixed, do_rescale=False)["pixel_values"].dtype == np.float32
    with pytest.raises(CompactFormatError, match="different tables"):
        proc(mixed, do_rescale=False, encoding="uint8+lut")
    # a family whose floats are not a table of its uint8 pixels keeps the float formats only
    monkeypatch.setattr(type(proc), "compact_exact", False)
    with pytest.raises(CompactFormatError, match="not a table of its uint8 pixels"):
        proc(img, encoding="uint8+lut")
    assert proc(img)["pixel_values"].dtype == np.float32
