"""backend="torchvision" against transformers' real torchvision image processors.

Qwen2VLImageProcessor and Kimi_K25ImageProcessor from transformers 5.24 with torch 2.14.1 and
torchvision 0.29.1, run in their own venv (tests/support/tv_oracle.py): every family's hub
config, real photos, every PIL mode, numpy inputs, tiny / odd / 4K / extreme-aspect sizes,
Pillow 13's vertical-first cases (irrelevant to torch, kept in the corpus), float32 and bfloat16
bits, compared with np.array_equal. The oracle runs once per module on the whole corpus.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from PIL import Image
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import KIMI_HUB, run_oracle

from smg_fast import _native, load_processor
from smg_fast.testing.oracles import HUB_QWEN, qwen_kwargs

QWEN = tuple(HUB_QWEN)
# (width, height): tiny, odd, 1080p, 4K, extreme aspects (200:1 is Qwen's limit), and the sizes
# whose Qwen2 resize Pillow 13 runs vertical first (640x427 -> 644x420, 600x400 -> 608x384).
SIZES = ((1, 1), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1), (4000, 25),
         (640, 427), (600, 400), (13, 1100))
KIMI_SIZES = SIZES[:4] + ((7200, 60), (60, 7200), (640, 427), (3000, 29))


def make_input(images, name: str):
    """A named corpus input.

    A real image as shipped, a PIL mode case, a resized photo, or a numpy array (RGBA, which the
    torchvision backend blends in float32, or (H, W, 1) grey)."""
    kind, _, arg = name.partition(":")
    if kind == "real":
        return images.open(arg)
    if kind == "mode":
        return images.mode_image(arg)
    if kind == "size":
        w, h = (int(v) for v in arg.split("x"))
        return images.rgb("astronaut").resize((w, h), Image.Resampling.BILINEAR)
    if kind == "np_rgba":
        return np.asarray(images.mode_image("RGBA")).copy()
    if kind == "np_grey":
        return np.asarray(images.open("camera"))[:, :, None].copy()
    raise KeyError(name)


INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + ["np_rgba", "np_grey"])
QWEN_CASES = ([(f, i) for f in QWEN for i in INPUTS]
              + [("qwen2_vl", f"mode:{k}") for k in MODE_KINDS])
KIMI_INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in KIMI_SIZES]
               + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
CLIP = HUB_QWEN["qwen2_vl"]
KIMI_CLIP = {**KIMI_HUB, "image_mean": list(CLIP["mean"]), "image_std": list(CLIP["std"])}
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:coffee"]


def every_value_alpha_pair() -> np.ndarray:
    """256 x 256 RGBA: rows alpha, columns value, the colour channels in three orders."""
    v, a = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))
    return np.ascontiguousarray(np.stack([v, 255 - v, v[:, ::-1] ^ 0x5A, a], axis=2))


def jobs_and_keys(images):
    jobs, keys = [], []
    for fam, name in QWEN_CASES:
        keys.append(("qwen", fam, name))
        jobs.append({"cls": "qwen", "kwargs": qwen_kwargs(fam),
                     "images": [make_input(images, name)]})
    for name in KIMI_INPUTS:
        keys.append(("kimi", "hub", name))
        jobs.append({"cls": "kimi", "kwargs": KIMI_HUB, "images": [make_input(images, name)]})
    for name in ("real:astronaut", "mode:RGBA", "size:37x53"):
        keys.append(("kimi", "clip", name))
        jobs.append({"cls": "kimi", "kwargs": KIMI_CLIP, "images": [make_input(images, name)]})
    for fam in ("qwen2_vl", "qwen3_vl"):
        keys.append(("qwen", fam, "batch"))
        jobs.append({"cls": "qwen", "kwargs": qwen_kwargs(fam),
                     "images": [make_input(images, n) for n in BATCH]})
    keys.append(("kimi", "hub", "batch"))
    jobs.append({"cls": "kimi", "kwargs": KIMI_HUB,
                 "images": [make_input(images, n) for n in BATCH]})
    keys.append(("convert", "rgba"))
    jobs.append({"cls": "qwen", "kwargs": qwen_kwargs("qwen2_vl"), "convert": True,
                 "images": [every_value_alpha_pair()]})
    return jobs, keys


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    jobs, keys = jobs_and_keys(real_images)
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref) -> None:
    out = proc(images, return_tensors="np")
    assert np.asarray(out["image_grid_thw"]).tolist() == ref["grid"].tolist()
    pv = np.asarray(out["pixel_values"])
    assert pv.shape == ref["pixel_values"].shape, (pv.shape, ref["pixel_values"].shape)
    assert pv.dtype == np.float32
    bad = pv != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    bf = np.asarray(proc(images, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert bf.dtype == np.uint16 and np.array_equal(bf, ref["bf16"]), "bfloat16 bits differ"


def check_counted(proc, images, ref, key: str, **options) -> None:
    """check() for a family returning an int64 count per image ``key`` where the grid is.

    The oracle keeps that count under "grid" (InternVL's num_patches)."""

    def call(*args, **kwargs):
        out = proc(*args, **kwargs, **options)
        assert np.asarray(out[key]).dtype == np.int64
        return {**out, "image_grid_thw": out[key]}

    check(call, images, ref)


@pytest.mark.parametrize("family,name", QWEN_CASES)
def test_qwen_exact(family, name, real_images, oracle):
    proc = load_processor(family, backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[("qwen", family, name)])


@pytest.mark.parametrize("name", KIMI_INPUTS)
def test_kimi_exact(name, real_images, oracle):
    proc = load_processor("kimi_k25", backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[("kimi", "hub", name)])


@pytest.mark.parametrize("name", ["real:astronaut", "mode:RGBA", "size:37x53"])
def test_kimi_other_mean_std_exact(name, real_images, oracle):
    proc = load_processor("kimi_k25", backend="torchvision", image_mean=CLIP["mean"],
                          image_std=CLIP["std"])
    check(proc, [make_input(real_images, name)], oracle[("kimi", "clip", name)])


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl", "kimi_k25"])
def test_batch_exact(family, real_images, oracle):
    """Several images in one call (transformers groups same-size images into one resize)."""
    key = ("kimi", "hub", "batch") if family == "kimi_k25" else ("qwen", family, "batch")
    proc = load_processor(family, backend="torchvision")
    check(proc, [make_input(real_images, n) for n in BATCH], oracle[key])


def test_backend_is_validated_and_fingerprinted():
    pil, tv = load_processor("qwen2_vl"), load_processor("qwen2_vl", backend="torchvision")
    assert (pil.config.backend, tv.config.backend) == ("pil", "torchvision")
    assert load_processor("kimi_k25").config.backend == "upstream"
    assert pil.config.fingerprint != tv.config.fingerprint
    with pytest.raises(ValueError, match="no 'pil' backend"):
        load_processor("kimi_k25", backend="pil")
    with pytest.raises(ValueError, match="no 'upstream' backend"):
        load_processor("qwen3_vl", backend="upstream")
    with pytest.raises(ValueError, match="backend must be one of"):
        load_processor("qwen2_vl", backend="tv")
    with pytest.raises(ValueError, match="BICUBIC"):
        load_processor("qwen2_vl", backend="torchvision", resample=4)


def test_numpy_rgba_blend_equals_torchvision_on_every_pair(oracle):
    """The torchvision backend's numpy RGBA blend equals its convert_to_rgb on every pair.

    PixelFormat.RGBA_OVER_WHITE_TORCH, the format the torchvision backend reads numpy RGBA in,
    against the backend's own convert_to_rgb for every (value, alpha) pair."""
    rgba = every_value_alpha_pair()
    ref = oracle[("convert", "rgba")]["rgb"]
    assert ref.shape == (256, 256, 3) and ref.dtype == np.uint8
    assert np.array_equal(_native.to_rgb(rgba, _native.PixelFormat.RGBA_OVER_WHITE_TORCH), ref)


def test_numpy_rgba_is_read_in_place_without_a_full_size_temporary():
    """An RGBA array is blended while the native core reads it: no full-size temporary.

    No converted copy, no blended (H, W, 3) array or index arrays built in NumPy.
    """
    proc = load_processor("qwen2_vl", backend="torchvision")
    arr = np.random.default_rng(5).integers(0, 256, (900, 1100, 4), dtype=np.uint8)
    proc(arr)  # warm: pipelines, pools
    tracemalloc.start()
    try:
        proc(arr)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < arr.shape[0] * arr.shape[1] // 4, f"peak {peak} bytes"
