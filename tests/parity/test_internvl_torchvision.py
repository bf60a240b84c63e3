"""InternVL with backend="torchvision" against transformers' GotOcr2ImageProcessor.

transformers 5.24 with torch and torchvision 0.29.1 in the oracle venv (tests/support/tv_oracle.py),
configured as OpenGVLab/InternVL3-1B-hf's preprocessor_config.json (HUB_INTERNVL): torch's uint8
antialiased BICUBIC resize onto the tile canvas and of the thumbnail, then the fused rescale +
normalize. Real photos, every PIL mode, numpy inputs, tiny / 1080p / 4K / extreme-aspect and
tie sizes, a batch, other tile bounds, float32 and bfloat16 bits, compared with
np.array_equal (num_patches where the grid is); the oracle runs once for the module."""

from __future__ import annotations

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle
from test_torchvision_parity import check as check_patches
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_INTERNVL

SIZES = ((1, 1), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1), (4000, 25),
         (448, 448), (1344, 1344), (896, 448), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:retina"]
OTHER = {"fewer": {**HUB_INTERNVL, "min_patches": 2, "max_patches": 6},
         "off": {**HUB_INTERNVL, "crop_to_patches": False}}


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    keys, jobs = [], []
    for name in INPUTS:
        keys.append(("hub", name))
        jobs.append({"cls": "internvl", "kwargs": HUB_INTERNVL,
                     "images": [make_input(real_images, name)]})
    keys.append(("hub", "batch"))
    jobs.append({"cls": "internvl", "kwargs": HUB_INTERNVL,
                 "images": [make_input(real_images, n) for n in BATCH]})
    for other, kwargs in OTHER.items():
        for name in ("real:coffee", "size:1920x1080", "size:4000x25"):
            keys.append((other, name))
            jobs.append({"cls": "internvl", "kwargs": kwargs,
                         "images": [make_input(real_images, name)]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_internvl"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref) -> None:
    """test_torchvision_parity's check (float32 and bfloat16), num_patches where the grid is."""

    def call(*args, **kwargs):
        out = proc(*args, **kwargs)
        assert np.asarray(out["num_patches"]).dtype == np.int64
        return {**out, "image_grid_thw": out["num_patches"]}  # the oracle keeps it under "grid"

    check_patches(call, images, ref)


@pytest.mark.parametrize("name", INPUTS)
def test_internvl_exact(name, real_images, oracle):
    proc = load_processor("internvl", backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[("hub", name)])


def test_internvl_batch_exact(real_images, oracle):
    proc = load_processor("internvl", backend="torchvision")
    ref = oracle[("hub", "batch")]
    assert ref["grid"].tolist()[4] == 10  # retina: 3x3 tiles (the tie rule) and the thumbnail
    check(proc, [make_input(real_images, n) for n in BATCH], ref)


@pytest.mark.parametrize("other", list(OTHER))
@pytest.mark.parametrize("name", ["real:coffee", "size:1920x1080", "size:4000x25"])
def test_internvl_other_tiling_exact(other, name, real_images, oracle):
    kwargs = OTHER[other]
    proc = load_processor("internvl", backend="torchvision", **{
        k: kwargs[k] for k in ("crop_to_patches", "min_patches", "max_patches")})
    check(proc, [make_input(real_images, name)], oracle[(other, name)])
