"""The SIMD normalize + patchify kernels this CPU runs, against the real references.

The cases their store scheme and value forms must get right: patch 14 and 16 (the compiled
shapes) and others (the generic one), merge 1 and 2, temporal 1, 2 and 3, grids with an odd
number of merged blocks, zero padding on the right and bottom, images smaller than one patch,
every dtype, and means / stds other than the defaults, including ones whose single-precision
form does not match the table (the AVX2 kernel then gathers from it). References:
transformers' Qwen2VLImageProcessorPil with the same call-time options, and Kimi-K2.5's upstream
NumPy order (smg_fast.testing.oracles); bfloat16 / float16 are torch's conversions of
the reference's float32. Each case also checks the kernel the dispatch's fixed order picks
(Pipeline.fixed_kernel; self-tuning may run another allowed one), so a fast path that silently
stopped being ready fails here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from support.cpu_flags import cpu_flags
from support.oracle_cache import hf_processor_call

import smg_fast
from smg_fast.testing.oracles import HUB_KIMI, kimi_upstream

DTYPES = ["float32", "bfloat16", "float16"]
# Kimi (float64 order) constants whose single-precision form misses some table value in every
# dtype: the AVX2 kernel must gather them.
GATHER_MEAN, GATHER_STD = (0.2, 0.4, 0.2), (0.01, 0.02, 0.07)


def simd_family(patch: int) -> str:
    """The kernel family the dispatch must pick for this patch size on this CPU and cap."""
    feats = smg_fast.cpu_features()
    if feats["avx512vbmi"] and patch <= 16:
        return "avx512"
    if feats["avx2"] and {"fma", "f16c"} <= cpu_flags() and patch >= 4:
        return "avx2"
    return "table"


def check_kernel(pipe, patch: int, gather: bool = False) -> None:
    family = simd_family(patch)
    if family == "avx2":
        assert pipe.fixed_kernel == ("avx2-gather" if gather else "avx2-fast"), pipe.fixed_kernel
    elif family == "avx512":
        assert pipe.fixed_kernel in ("avx512-fast", "avx512"), pipe.fixed_kernel
    else:
        assert pipe.fixed_kernel == "table", pipe.fixed_kernel


def as_dtype(ref_f32: np.ndarray, dtype: str) -> np.ndarray:
    """The reference in `dtype`, as bits where numpy has no such type (bfloat16: uint16)."""
    t = torch.from_numpy(np.ascontiguousarray(ref_f32))
    if dtype == "float32":
        return ref_f32
    if dtype == "bfloat16":
        return t.to(torch.bfloat16).view(torch.uint16).numpy()
    return t.to(torch.float16).numpy()


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
    if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
        bad = np.argwhere(got != want)
        raise AssertionError(f"{len(bad)} values differ, first at {bad[0].tolist()}: "
                             f"{got[tuple(bad[0])]!r} != {want[tuple(bad[0])]!r}")


# ---- Qwen: transformers' PIL processor with the same call-time options ----

# (patch, merge, temporal), crop (h, w) of the photo, max_pixels: grids with an odd number of
# merged blocks on both sides, and a crop that resizes below its own size.
QWEN_LAYOUTS = [
    ((14, 2, 2), (85, 141), 40000),   # grid 6 x 10: 3 x 5 merged blocks
    ((16, 2, 2), (97, 159), 40000),   # grid 6 x 10 in 16-pixel patches
    ((14, 1, 1), (71, 99), 40000),    # odd grid without merging
    ((16, 2, 1), (160, 97), 40000),
    ((14, 2, 1), (427, 640), 30000),  # downscaled
    ((16, 1, 2), (50, 83), 40000),
    ((8, 2, 3), (43, 77), 40000),     # generic shape: another patch size, 3 copies
    ((20, 1, 2), (101, 61), 40000),   # generic shape: over 16 pixels (two loads per row)
]
QWEN_NORMS = {
    "clip": None,  # the hub config's
    "other": ([0.2, 0.3, 0.4], [0.5, 0.6, 0.7]),
    "odd": ([0.123456789, 0.987654321, 0.3], [0.0123456789, 3.21, 0.333333333]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", list(QWEN_NORMS))
@pytest.mark.parametrize("layout,crop,max_pixels", QWEN_LAYOUTS,
                         ids=[f"p{p}m{m}t{t}-{h}x{w}" for (p, m, t), (h, w), _ in QWEN_LAYOUTS])
def test_qwen_layouts_equal_transformers(layout, crop, max_pixels, norm, dtype, photo, hf_qwen2,
                                         ours):
    patch, merge, temporal = layout
    opts = dict(patch_size=patch, merge_size=merge, temporal_patch_size=temporal,
                size={"shortest_edge": 64, "longest_edge": max_pixels})
    if QWEN_NORMS[norm]:
        opts.update(image_mean=QWEN_NORMS[norm][0], image_std=QWEN_NORMS[norm][1])
    img = np.ascontiguousarray(np.asarray(photo)[:crop[0], :crop[1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf_processor_call(hf_qwen2, img, **opts)
    _, gh, gw = np.asarray(ref["image_grid_thw"])[0].tolist()
    got = ours("qwen2_vl")(img, dtype=dtype, **opts)
    assert np.array_equal(got["image_grid_thw"], ref["image_grid_thw"])
    assert_bits_equal(got["pixel_values"], as_dtype(np.asarray(ref["pixel_values"]), dtype))
    if (patch, merge) in ((14, 2), (16, 2)):
        assert (gh // merge) % 2 == 1 or (gw // merge) % 2 == 1, (gh, gw)
    same = {k: v for k, v in opts.items() if k != "size"}  # the same pipeline, loaded
    check_kernel(ours("qwen2_vl", **same).pipeline(dtype), patch)


# ---- Kimi: upstream's float64 order, zero padding right and bottom ----

KIMI_NORMS = {
    "half": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5), False),
    "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711), None),
    "gather": (GATHER_MEAN, GATHER_STD, True),
}
# crop (h, w) and in_patch_limit: padding on both sides, sizes below one patch and one merged
# block, an unresized photo (read as RGBX from a PIL image).
KIMI_CASES = [((9, 20), 16384), ((13, 13), 16384), ((15, 29), 16384), ((101, 157), 16384),
              ((427, 640), 16384), ((427, 640), 300)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", list(KIMI_NORMS))
@pytest.mark.parametrize("patch", [14, 16])
def test_kimi_padding_equals_upstream(patch, norm, dtype, real_images, ours):
    mean, std, gather = KIMI_NORMS[norm]
    cfg = dict(HUB_KIMI, image_mean=mean, image_std=std, patch_size=patch)
    photo = real_images.rgb("rocket")
    for (h, w), limit in KIMI_CASES:
        case = dict(cfg, in_patch_limit=limit)
        proc = ours("kimi_k25", image_mean=list(mean), image_std=list(std), patch_size=patch,
                    in_patch_limit=limit)
        img = photo.crop((0, 0, w, h))
        ref_pv, ref_grid = kimi_upstream(img, case)
        out = proc(img, return_tensors="np", dtype=dtype)
        assert np.asarray(out["image_grid_thw"]).tolist() == ref_grid.tolist()
        assert_bits_equal(out["pixel_values"], as_dtype(ref_pv, dtype))
        if gather is not None:
            check_kernel(proc.pipeline(dtype), patch, gather)


def test_forms_both_occur_on_avx2():
    """The cases above cover both AVX2 forms in every dtype (where this CPU runs them)."""
    if simd_family(14) != "avx2":
        pytest.skip("this CPU (or cap) does not run the AVX2 kernel for 14-pixel patches")
    for dtype in DTYPES:
        fast = smg_fast.load_processor("kimi_k25").pipeline(dtype)
        slow = smg_fast.load_processor("kimi_k25", image_mean=list(GATHER_MEAN),
                                       image_std=list(GATHER_STD)).pipeline(dtype)
        assert (fast.fixed_kernel, slow.fixed_kernel) == ("avx2-fast", "avx2-gather")


# ---- the destination: nothing written outside this image's rows ----

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["half", "gather"])
@pytest.mark.parametrize("patch,merge,temporal", [(14, 2, 2), (16, 2, 1), (14, 1, 1), (5, 1, 3),
                                                  (8, 2, 2), (17, 1, 1), (20, 2, 2), (1, 1, 1),
                                                  (2, 2, 2), (3, 1, 2), (4, 1, 1), (4, 2, 1),
                                                  (33, 1, 1), (40, 2, 2), (64, 1, 1), (64, 2, 3),
                                                  (14, 2, 16), (16, 4, 5), (7, 16, 1), (6, 3, 7)])
def test_writes_stay_inside_the_destination(patch, merge, temporal, norm, dtype, photo):
    """Whole-vector stores overflow each pixel row.

    The last rows of each patch must not: the elements just before and after an image's rows
    (another image's, in a batch) keep their bits, and the rows equal the table applied in the
    documented order."""
    from test_patchify_layouts import reference

    from smg_fast import _native

    mean, std, _ = KIMI_NORMS[norm]
    dt = getattr(_native.DType, dtype.upper())
    pipe = _native.Pipeline(recipe=_native.LutRecipe.KIMI_DIVIDE_MULTIPLY, rescale=1 / 255,
                            mean=list(mean), std=list(std), dtype=dt,
                            filter=_native.Filter.BICUBIC, pass_order=_native.PassOrder.PILLOW13,
                            patch=patch, merge=merge, temporal=temporal)
    check_kernel(pipe, patch, gather=norm == "gather")
    img = np.ascontiguousarray(np.asarray(photo)[:61, :97])
    grid_h = -(-61 // (patch * merge)) * merge
    grid_w = -(-97 // (patch * merge)) * merge
    n = pipe.output_elems(97, 61, grid_h, grid_w)
    npdt = {"float32": np.float32, "bfloat16": np.uint16, "float16": np.float16}[dtype]
    dst = np.empty(n + 200, npdt)
    dst.view(np.uint8)[:] = 0xA5
    pipe.run(img, 97, 61, grid_h, grid_w, dst, 100)
    assert np.all(dst[:100].view(np.uint8) == 0xA5) and np.all(dst[100 + n:].view(np.uint8) == 0xA5)
    want = reference(img, pipe.lut, patch, merge, temporal, grid_h, grid_w)
    assert_bits_equal(dst[100:100 + n].view(want.dtype).reshape(want.shape), want)
