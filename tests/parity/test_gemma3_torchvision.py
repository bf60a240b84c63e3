"""Gemma 3 with backend="torchvision" against transformers' Gemma3ImageProcessor.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py), configured as the published google/gemma-3-4b-it
preprocessor_config.json (HUB_GEMMA3): torch's uint8 antialiased BILINEAR resize to 896x896 and
the fused rescale + normalize. Real photos, every PIL mode, numpy inputs, tiny / odd / 4K /
extreme-aspect sizes, a batch, float32 and bfloat16 bits, compared with np.array_equal; the
oracle runs once per module on the whole corpus."""

from __future__ import annotations

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle
from test_torchvision_parity import check as check_patches
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_GEMMA3

SIZES = ((1, 1), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1), (4000, 25),
         (896, 896), (897, 895), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:coffee"]
SMALL = {**HUB_GEMMA3, "size": {"height": 224, "width": 224}}  # another square size
# pan-and-scan as Gemma3Processor configures it (the oracle's class takes it as attributes)
PAS = dict(do_pan_and_scan=True, pan_and_scan_min_crop_size=256, pan_and_scan_max_num_crops=4,
           pan_and_scan_min_ratio_to_activate=1.2)
PAS_INPUTS = ["size:1500x400", "size:400x1500", "size:1501x500", "size:900x751", "size:3000x200",
              "size:5000x900", "real:rocket", "mode:RGBA", "np_rgba"]
PAS_BATCH = ["size:1500x400", "real:chelsea", "size:1500x400", "size:400x1500", "mode:P"]


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    keys, jobs = [], []
    for name in INPUTS:
        keys.append(("hub", name))
        jobs.append({"cls": "gemma3", "kwargs": HUB_GEMMA3,
                     "images": [make_input(real_images, name)]})
    keys.append(("hub", "batch"))
    jobs.append({"cls": "gemma3", "kwargs": HUB_GEMMA3,
                 "images": [make_input(real_images, n) for n in BATCH]})
    for name in ("real:astronaut", "size:4000x25"):
        keys.append(("small", name))
        jobs.append({"cls": "gemma3", "kwargs": SMALL, "images": [make_input(real_images, name)]})
    for name in PAS_INPUTS:
        keys.append(("pas", name))
        jobs.append({"cls": "gemma3", "kwargs": {**HUB_GEMMA3, **PAS},
                     "images": [make_input(real_images, name)]})
    keys.append(("pas", "batch"))
    jobs.append({"cls": "gemma3", "kwargs": {**HUB_GEMMA3, **PAS},
                 "images": [make_input(real_images, n) for n in PAS_BATCH]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_gemma3"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref, **options) -> None:
    """test_torchvision_parity's check (float32 and bfloat16), num_crops where the grid is."""

    def call(*args, **kwargs):
        out = proc(*args, **kwargs, **options)
        assert np.asarray(out["num_crops"]).dtype == np.int64
        return {**out, "image_grid_thw": out["num_crops"]}  # the oracle keeps it under "grid"

    check_patches(call, images, ref)


@pytest.mark.parametrize("name", INPUTS)
def test_gemma3_exact(name, real_images, oracle):
    proc = load_processor("gemma3", backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[("hub", name)])


def test_gemma3_batch_exact(real_images, oracle):
    proc = load_processor("gemma3", backend="torchvision")
    check(proc, [make_input(real_images, n) for n in BATCH], oracle[("hub", "batch")])


@pytest.mark.parametrize("name", ["real:astronaut", "size:4000x25"])
def test_gemma3_other_size_exact(name, real_images, oracle):
    proc = load_processor("gemma3", backend="torchvision", patch_size=224)
    check(proc, [make_input(real_images, name)], oracle[("small", name)])


@pytest.mark.parametrize("name", PAS_INPUTS)
def test_gemma3_pan_and_scan_exact(name, real_images, oracle):
    proc = load_processor("gemma3", backend="torchvision")
    check(proc, [make_input(real_images, name)], oracle[("pas", name)], **PAS)


def test_gemma3_pan_and_scan_batch_exact(real_images, oracle):
    """Thumbnails and crops of several images, grouped by size in transformers' class."""
    proc = load_processor("gemma3", backend="torchvision")
    ref = oracle[("pas", "batch")]
    assert ref["grid"].tolist()[0] > 0 and ref["grid"].tolist()[1] == 0
    check(proc, [make_input(real_images, n) for n in PAS_BATCH], ref, **PAS)
