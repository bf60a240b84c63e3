"""Bit-exact parity of the Kimi-K2.5 (MoonViT) processor with the upstream preprocessing.

The oracle is the upstream PIL/NumPy code re-implemented in plain NumPy + Pillow
(smg_fast.testing.oracles, which the benchmarks measure against too)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from smg_fast.testing.oracles import (
    HUB_KIMI,
    kimi_normalize,
    kimi_sizes,
    kimi_upstream,
    kimi_upstream_batch,
)


@pytest.fixture
def kimi(ours):
    return ours("kimi_k25")


# ---------------------------------------------------------------------------------------------
# The oracle itself: the worked example of the upstream navit resize (600x400 -> 616x420)
# ---------------------------------------------------------------------------------------------


def test_reference_worked_example():
    assert kimi_sizes(600, 400) == (600, 400, 616, 420)
    pv, grid = kimi_upstream(Image.new("RGB", (600, 400), (255, 0, 128)))
    assert grid.tolist() == [[1, 30, 44]] and pv.shape == (30 * 44, 3, 14, 14)
    assert 30 * 44 // 4 == 330
    # padding (last patch column of the first row) normalises to -1, content to its value
    assert np.all(pv[43] == -1.0)  # patch column 43 (x 602..615) is all padding
    assert np.all(pv[42, :, :, 12:] == -1.0)  # x 600, 601 of patch column 42 are padding
    assert np.all(pv[42, 0, :, :12] == 1.0)
    assert pv[0, 0, 0, 0] == np.float32(1.0) and pv[0, 1, 0, 0] == np.float32(-1.0)


# ---------------------------------------------------------------------------------------------
# Real images
# ---------------------------------------------------------------------------------------------


def test_real_image(real_image_name, real_images, kimi, check_kimi):
    ref_pv, ref_grid = kimi_upstream(real_images.open(real_image_name))
    check_kimi(kimi(real_images.open(real_image_name), return_tensors="np"), ref_pv, ref_grid)


def test_pil_mode(mode_kind, real_images, kimi, check_kimi):
    """Upstream Kimi converts with image.convert("RGB"): alpha is dropped, not composited."""
    ref_pv, ref_grid = kimi_upstream(real_images.mode_image(mode_kind))
    check_kimi(kimi(real_images.mode_image(mode_kind), return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("name", ["rocket", "coffee", "grace_hopper"])
def test_bytes_and_path_input(name, real_images, kimi, check_kimi):
    """Files without EXIF orientation: bytes, str path and Path equal the decoded PIL image."""
    ref_pv, ref_grid = kimi_upstream(Image.open(io.BytesIO(real_images.bytes(name))))
    for src in (real_images.bytes(name), str(real_images.path(name)), real_images.path(name)):
        check_kimi(kimi(src, return_tensors="np"), ref_pv, ref_grid)


def test_numpy_rgb_input(real_images, kimi, check_kimi):
    arr = real_images.rgb_array("china")
    ref_pv, ref_grid = kimi_upstream(Image.fromarray(arr))
    check_kimi(kimi(arr, return_tensors="np"), ref_pv, ref_grid)


def test_multi_image(real_images, kimi, check_kimi):
    names = ["chelsea", "rocket", "camera", "logo2"]
    ref_pv, ref_grid = kimi_upstream_batch([real_images.open(n) for n in names])
    check_kimi(kimi([real_images.open(n) for n in names], return_tensors="np"), ref_pv, ref_grid)


# ---------------------------------------------------------------------------------------------
# Sizes: no resize, tiny, huge aspect, per-side limit, total-patch limit
# ---------------------------------------------------------------------------------------------


def _content(real_images, w, h):
    """A real photo brought to w x h (crop when it fits, else a bilinear resize)."""
    src = real_images.rgb("retina")  # 1411x1411
    if w + 100 <= src.width and h + 100 <= src.height:
        return src.crop((100, 100, 100 + w, 100 + h))
    return src.resize((w, h), Image.Resampling.BILINEAR)


def test_600x400_worked_example(real_images, kimi, check_kimi):
    image = real_images.open("coffee")
    assert image.size == (600, 400)
    out = kimi(image, return_tensors="np")
    assert np.asarray(out["image_grid_thw"]).tolist() == [[1, 30, 44]]
    assert [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1)] == [330]
    assert np.asarray(out["pixel_values"]).shape == (1320, 3, 14, 14)
    check_kimi(out, *kimi_upstream(real_images.open("coffee")))


@pytest.mark.parametrize(
    "w,h,why",
    [
        (1, 1, "tiny"),
        (13, 15, "below one patch"),
        (14, 14, "one patch"),
        (29, 27, "padding both ways"),
        (4, 2000, "aspect 500, no resize"),
        (2000, 6, "aspect 333, no resize"),
        (8000, 300, "per-side limit on width"),
        (320, 7300, "per-side limit on height"),
        (2000, 2000, "total patch limit"),
        (1792, 1792, "exactly at the patch limit (128x128 patches)"),
        (1806, 1792, "one column over the limit"),
    ],
)
def test_sizes(w, h, why, real_images, kimi, check_kimi):
    image = _content(real_images, w, h)
    assert image.size == (w, h)
    ref_pv, ref_grid = kimi_upstream(image)
    out = kimi(image, return_tensors="np")
    check_kimi(out, ref_pv, ref_grid)
    new_w, new_h, pad_w, pad_h = kimi_sizes(w, h)
    assert tuple(kimi.grid(w, h)) == (1, pad_h // 14, pad_w // 14)
    assert kimi.num_tokens(w, h) == (pad_h // 28) * (pad_w // 28)


def test_size_cases_exercise_each_limit():
    assert kimi_sizes(8000, 300)[:2] == (7168, 268)  # per-side limit, truncation of 268.8
    assert kimi_sizes(320, 7300)[1] == 7168
    assert kimi_sizes(2000, 2000)[0] < 2000  # total patch limit
    assert kimi_sizes(1792, 1792)[:2] == (1792, 1792)
    assert kimi_sizes(1806, 1792)[0] < 1806
    assert kimi_sizes(4, 2000)[:2] == (4, 2000)


def test_overrides(real_images, ours, check_kimi):
    cfg = dict(HUB_KIMI, in_patch_limit=900, patch_limit_on_one_side=30)
    proc = ours("kimi_k25", in_patch_limit=900, patch_limit_on_one_side=30)
    for name in ("astronaut", "rocket", "logo2"):
        image = real_images.open(name)
        assert kimi_sizes(*image.size, cfg)[:2] != image.size  # the overrides force a resize
        check_kimi(proc(image, return_tensors="np"), *kimi_upstream(real_images.open(name), cfg))


# ---------------------------------------------------------------------------------------------
# Normalization with other mean / std: upstream computes in float64 and stores float32 per step
# ---------------------------------------------------------------------------------------------

MEAN_STD = {
    "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "half": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "odd": ((0.123456789, 0.987654321, 0.3), (0.0123456789, 3.21, 0.333333333)),
}


def upstream_table(mean, std) -> np.ndarray:
    """Upstream's normalize() applied to every uint8 value, as a (3, 256) float32 table."""
    levels = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
    return np.ascontiguousarray(kimi_normalize(levels, mean, std).T)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("which", list(MEAN_STD))
def test_table_is_upstreams_float64_order(which, dtype):
    """All 768 values of the table the kernels use (and must reproduce) equal upstream's."""
    import torch

    from smg_fast import load_processor

    mean, std = MEAN_STD[which]
    lut = load_processor("kimi_k25", image_mean=list(mean), image_std=list(std)).pipeline(dtype).lut
    want = torch.from_numpy(upstream_table(mean, std)).to(getattr(torch, dtype))
    if dtype == "bfloat16":
        want = want.view(torch.uint16)
    assert np.array_equal(np.asarray(lut).view(np.uint8), want.numpy().view(np.uint8))


def test_float32_constants_would_differ():
    """The cases above can fail: float32 constants change most values for CLIP's mean / std."""
    mean, std = MEAN_STD["clip"]
    x = (np.arange(256)[:, None] / 255.0).astype(np.float32).repeat(3, axis=1)
    f32 = ((x - np.float32(mean)) * (np.float32(1) / np.float32(std))).T
    assert (f32 != upstream_table(mean, std)).mean() > 0.3


@pytest.mark.parametrize("which", list(MEAN_STD))
def test_mean_std_overrides(which, real_images, ours, check_kimi):
    mean, std = MEAN_STD[which]
    cfg = dict(HUB_KIMI, image_mean=mean, image_std=std)
    proc = ours("kimi_k25", image_mean=list(mean), image_std=list(std))
    names = ["chelsea", "rocket", "logo2"]
    for name in names:
        out = proc(real_images.open(name), return_tensors="np")
        check_kimi(out, *kimi_upstream(real_images.open(name), cfg))
    out = proc([real_images.open(n) for n in names], return_tensors="np")
    check_kimi(out, *kimi_upstream_batch([real_images.open(n) for n in names], cfg))


@pytest.mark.parametrize("which", ["clip", "imagenet", "half"])
def test_mean_std_overrides_bfloat16(which, real_images, ours):
    """bfloat16 output is upstream's float32 rounded to nearest even, as .to(torch.bfloat16)."""
    import torch

    mean, std = MEAN_STD[which]
    cfg = dict(HUB_KIMI, image_mean=mean, image_std=std)
    proc = ours("kimi_k25", image_mean=list(mean), image_std=list(std))
    images = [real_images.open("astronaut"), _content(real_images, 29, 27)]
    ref_pv, _ = kimi_upstream_batch(images, cfg)
    out = proc(images, return_tensors="pt", dtype="bfloat16")
    assert out["pixel_values"].dtype == torch.bfloat16
    assert torch.equal(out["pixel_values"], torch.from_numpy(ref_pv).to(torch.bfloat16))


def test_grid_sweep(kimi):
    """grid()/num_tokens() without pixels agree with the upstream sizes on many shapes."""
    rng = np.random.default_rng(7)
    sizes = [(int(a), int(b)) for a, b in rng.integers(1, 9000, size=(300, 2))]
    sizes += [(1, 1), (14, 14), (27, 28), (28, 27), (7168, 7168), (7169, 1), (1, 7169)]
    for w, h in sizes:
        _, _, pw, ph = kimi_sizes(w, h)
        assert tuple(kimi.grid(w, h)) == (1, ph // 14, pw // 14), (w, h)
        assert kimi.num_tokens(w, h) == (ph // 28) * (pw // 28), (w, h)


# ---------------------------------------------------------------------------------------------
# transformers' torchvision Kimi_K25ImageProcessor (run in its own venv: support/tv_oracle.py):
# the upstream backend is close to it, backend="torchvision" equal to it
# ---------------------------------------------------------------------------------------------

TV_NAMES = ["astronaut", "rocket", "hubble", "grace_hopper"]


@pytest.fixture(scope="module")
def tv_reference(real_images, tmp_path_factory):
    from support.tv_oracle import KIMI_HUB, run_oracle

    jobs = [{"cls": "kimi", "kwargs": KIMI_HUB, "images": [real_images.rgb(n)]} for n in TV_NAMES]
    return dict(zip(TV_NAMES, run_oracle(tmp_path_factory.mktemp("kimi_tv"), jobs), strict=True))


@pytest.mark.parametrize("name", TV_NAMES)
def test_close_to_transformers_torchvision(name, real_images, kimi, tv_reference):
    ref = tv_reference[name]
    out = kimi(real_images.open(name), return_tensors="np")
    ref_pv = ref["pixel_values"]
    ours_pv = np.asarray(out["pixel_values"])
    assert ref["grid"].tolist() == np.asarray(out["image_grid_thw"]).tolist()
    assert ref_pv.shape == ours_pv.shape
    # 2 levels of 8-bit input = 2/255 in [0,1], i.e. 2/(255*std) after normalisation
    tol = 2.0 / 255.0 / 0.5 + 1e-6
    close = np.abs(ref_pv - ours_pv) <= tol
    assert close.mean() >= 0.995, f"only {close.mean():.4%} of values within 2/255"


@pytest.mark.parametrize("name", TV_NAMES)
def test_torchvision_backend_equals_transformers_torchvision(name, real_images, tv_reference):
    from smg_fast import load_processor

    ref = tv_reference[name]
    out = load_processor("kimi_k25", backend="torchvision")(real_images.open(name),
                                                            return_tensors="np")
    assert ref["grid"].tolist() == np.asarray(out["image_grid_thw"]).tolist()
    assert np.array_equal(np.asarray(out["pixel_values"]), ref["pixel_values"])
