"""Gemma 4 and Gemma 3n with backend="torchvision" against transformers' torchvision classes.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py). Gemma 4: Gemma4ImageProcessor with its class defaults (HUB_GEMMA4,
what the published google/gemma-4 checkpoints hold): torch's uint8 antialiased BICUBIC resize
to the budget size, the float32 rescale u * f32(1/255), channel-last patches padded to 2520
with position ids. Gemma 3n: SiglipImageProcessor as google/gemma-3n-E4B-it's
preprocessor_config.json configures it (HUB_GEMMA3N): BILINEAR to 768x768, rescale without
normalization. Real photos, every PIL mode, numpy inputs, tiny / odd / 4K / extreme-aspect sizes
and a batch, float32 and bfloat16 bits, compared with np.array_equal; the oracle runs once per
module."""

from __future__ import annotations

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_GEMMA3N, HUB_GEMMA4

SIZES = ((1, 1), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1), (4000, 25),
         (48, 48), (816, 768), (768, 768), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:coffee"]
OTHER_BUDGET = {**HUB_GEMMA4, "max_soft_tokens": 70}
NORMALIZED = {**HUB_GEMMA3N, "do_normalize": True}  # mean = std = 0.5, the fused form


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    keys, jobs = [], []
    for fam, cls, kwargs in (("gemma4", "gemma4", HUB_GEMMA4), ("gemma3n", "siglip", HUB_GEMMA3N)):
        for name in INPUTS:
            keys.append((fam, name))
            jobs.append({"cls": cls, "kwargs": kwargs, "images": [make_input(real_images, name)]})
        keys.append((fam, "batch"))
        jobs.append({"cls": cls, "kwargs": kwargs,
                     "images": [make_input(real_images, n) for n in BATCH]})
    for name in ("real:astronaut", "size:4000x25"):
        keys.append(("gemma4_70", name))
        jobs.append({"cls": "gemma4", "kwargs": OTHER_BUDGET,
                     "images": [make_input(real_images, name)]})
        keys.append(("gemma3n_normalized", name))
        jobs.append({"cls": "siglip", "kwargs": NORMALIZED,
                     "images": [make_input(real_images, name)]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_gemma4"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref, positions: bool) -> None:
    """float32 and bfloat16 bits equal to the oracle's; Gemma 4's position ids too."""
    out = proc(images, return_tensors="np")
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32 and pv.shape == ref["pixel_values"].shape, pv.shape
    bad = pv != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    if positions:
        assert np.array_equal(out["image_position_ids"], ref["grid"])
    bf = np.asarray(proc(images, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert bf.dtype == np.uint16 and np.array_equal(bf, ref["bf16"]), "bfloat16 bits differ"


@pytest.mark.parametrize("fam", ["gemma4", "gemma3n"])
@pytest.mark.parametrize("name", INPUTS)
def test_exact(fam, name, real_images, oracle):
    proc = load_processor(fam, backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[(fam, name)], fam == "gemma4")


@pytest.mark.parametrize("fam", ["gemma4", "gemma3n"])
def test_batch_exact(fam, real_images, oracle):
    proc = load_processor(fam, backend="torchvision")
    check(proc, [make_input(real_images, n) for n in BATCH], oracle[(fam, "batch")],
          fam == "gemma4")


@pytest.mark.parametrize("name", ["real:astronaut", "size:4000x25"])
def test_other_settings_exact(name, real_images, oracle):
    """Another soft-token budget; Gemma 3n's processor asked to normalize (the fused form)."""
    proc = load_processor("gemma4", backend="torchvision", max_soft_tokens=70)
    check(proc, [make_input(real_images, name)], oracle[("gemma4_70", name)], True)
    proc = load_processor("gemma3n", backend="torchvision", do_normalize=True)
    check(proc, [make_input(real_images, name)], oracle[("gemma3n_normalized", name)], False)
