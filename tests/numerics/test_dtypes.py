"""Output dtypes.

Bfloat16 / float16 are the exact (round-to-nearest-even) conversions of the float32 result, and
return_tensors="pt" yields torch tensors of the right dtype and shape."""

from __future__ import annotations

import numpy as np
import pytest


def _images(real_images):
    return [real_images.open("rocket"), real_images.mode_image("RGBA"), real_images.open("camera")]


def _f32(proc, images):
    out = proc(images, return_tensors="np", dtype="float32")
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32
    return out, pv


def test_default_dtype_is_float32(family, real_images, ours):
    proc = ours(family)
    a = proc(_images(real_images), return_tensors="np")
    _, b = _f32(proc, _images(real_images))
    assert np.asarray(a["pixel_values"]).dtype == np.float32
    assert np.array_equal(np.asarray(a["pixel_values"]), b)


def test_bfloat16_bits_equal_torch(family, real_images, ours):
    torch = pytest.importorskip("torch")
    proc = ours(family)
    _, f32 = _f32(proc, _images(real_images))
    out = proc(_images(real_images), return_tensors="np", dtype="bfloat16")
    bits = np.asarray(out["pixel_values"])
    assert bits.dtype == np.uint16, "np + bfloat16 must return the bf16 bit patterns as uint16"
    assert bits.shape == f32.shape
    ref = torch.from_numpy(f32).to(torch.bfloat16).view(torch.uint16).numpy()
    if not np.array_equal(bits, ref):
        bad = np.argwhere(bits != ref)[0]
        raise AssertionError(
            f"{int((bits != ref).sum())} bf16 values differ; first at {bad.tolist()}: "
            f"f32={f32[tuple(bad)]!r} ours=0x{int(bits[tuple(bad)]):04x} "
            f"torch=0x{int(ref[tuple(bad)]):04x}"
        )
    assert np.array_equal(
        np.asarray(out["image_grid_thw"]), _f32(proc, _images(real_images))[0]["image_grid_thw"]
    )


def test_bfloat16_round_to_nearest_even_without_torch(real_images, ours):
    """Independent of torch: bf16 = top 16 bits of f32 after RNE rounding (no NaNs here)."""
    proc = ours("qwen2_vl")
    _, f32 = _f32(proc, real_images.open("chelsea"))
    bits = np.asarray(
        proc(real_images.open("chelsea"), return_tensors="np", dtype="bfloat16")["pixel_values"]
    )
    u = f32.view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(bits, rne)


def test_float16_equals_numpy_and_torch(family, real_images, ours):
    proc = ours(family)
    _, f32 = _f32(proc, _images(real_images))
    out = proc(_images(real_images), return_tensors="np", dtype="float16")
    f16 = np.asarray(out["pixel_values"])
    assert f16.dtype == np.float16
    assert np.array_equal(f16.view(np.uint16), f32.astype(np.float16).view(np.uint16))
    torch = pytest.importorskip("torch")
    ref = torch.from_numpy(f32).to(torch.float16).numpy()
    assert np.array_equal(f16.view(np.uint16), ref.view(np.uint16))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_return_tensors_pt(family, dtype, real_images, ours):
    torch = pytest.importorskip("torch")
    proc = ours(family)
    ref_out, f32 = _f32(proc, _images(real_images))
    out = proc(_images(real_images), return_tensors="pt", dtype=dtype)
    pv = out["pixel_values"]
    grid = out["image_grid_thw"]
    assert isinstance(pv, torch.Tensor) and isinstance(grid, torch.Tensor)
    assert (
        pv.dtype
        == {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    )
    assert grid.dtype == torch.int64
    assert tuple(pv.shape) == f32.shape
    assert grid.tolist() == np.asarray(ref_out["image_grid_thw"]).tolist()
    assert pv.is_contiguous()
    assert torch.equal(pv, torch.from_numpy(f32).to(pv.dtype))
    if family == "kimi_k25":
        assert isinstance(out["grid_thws"], torch.Tensor)
        assert torch.equal(out["grid_thws"], grid)
    tokens = [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1).tolist()]
    assert tokens == [int(v) for v in np.asarray(ref_out["num_tokens"]).reshape(-1).tolist()]


def test_shapes_per_family(real_images, ours):
    out = ours("qwen2_vl")(real_images.open("rocket"), return_tensors="np")
    assert np.asarray(out["pixel_values"]).shape[1] == 3 * 2 * 14 * 14
    out = ours("qwen3_vl")(real_images.open("rocket"), return_tensors="np")
    assert np.asarray(out["pixel_values"]).shape[1] == 3 * 2 * 16 * 16
    out = ours("kimi_k25")(real_images.open("rocket"), return_tensors="np")
    assert np.asarray(out["pixel_values"]).shape[1:] == (3, 14, 14)


def test_bad_dtype_and_return_tensors(real_images, ours):
    proc = ours("qwen2_vl")
    with pytest.raises((ValueError, TypeError)):
        proc(real_images.open("chelsea"), return_tensors="np", dtype="float64")
    with pytest.raises((ValueError, TypeError)):
        proc(real_images.open("chelsea"), return_tensors="tf")
