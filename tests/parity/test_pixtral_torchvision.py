"""Pixtral with backend="torchvision" against transformers' PixtralImageProcessor.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py), configured as the published mistral-community/pixtral-12b
preprocessor_config.json (HUB_PIXTRAL): torch's uint8 antialiased BICUBIC resize under the
longest edge 1024 to patch multiples, the fused rescale + normalize, zero padding to the batch's
largest image. Real photos, every PIL mode, numpy inputs, tiny / odd / 4K / extreme-aspect sizes,
a batch of mixed sizes, float32 and bfloat16 bits, compared with np.array_equal; the oracle runs
once per module on the whole corpus."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle, run_with_smg_fast
from test_torchvision_parity import check_counted, make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_PIXTRAL

SIZES = ((1, 1), (37, 53), (15, 17), (1920, 1080), (1080, 1920), (3840, 2160), (1, 200),
         (200, 1), (4000, 25), (1024, 1024), (1025, 1023), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:900x37", "mode:RGBA", "real:coffee"]
SMALL = {**HUB_PIXTRAL, "size": {"longest_edge": 512}, "patch_size": {"height": 14, "width": 14}}


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    keys, jobs = [], []
    for name in INPUTS:
        keys.append(("hub", name))
        jobs.append({"cls": "pixtral", "kwargs": HUB_PIXTRAL,
                     "images": [make_input(real_images, name)]})
    keys.append(("hub", "batch"))
    jobs.append({"cls": "pixtral", "kwargs": HUB_PIXTRAL,
                 "images": [make_input(real_images, n) for n in BATCH]})
    for name in ("real:astronaut", "size:4000x25"):
        keys.append(("small", name))
        jobs.append({"cls": "pixtral", "kwargs": SMALL,
                     "images": [make_input(real_images, name)]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_pixtral"), jobs)
    return dict(zip(keys, results, strict=True))


@pytest.mark.parametrize("name", INPUTS)
def test_pixtral_exact(name, real_images, oracle):
    proc = load_processor("pixtral", backend="torchvision", max_image_pixels=None)
    check_counted(proc, [make_input(real_images, name)], oracle[("hub", name)], "image_sizes")


def test_pixtral_batch_pads_with_zeros_exact(real_images, oracle):
    proc = load_processor("pixtral", backend="torchvision")
    ref = oracle[("hub", "batch")]
    check_counted(proc, [make_input(real_images, n) for n in BATCH], ref, "image_sizes")
    h, w = ref["grid"][0]
    assert not ref["pixel_values"][0, :, h:, :].any() and h < ref["pixel_values"].shape[2]


@pytest.mark.parametrize("name", ["real:astronaut", "size:4000x25"])
def test_pixtral_other_size_and_patch_exact(name, real_images, oracle):
    proc = load_processor("pixtral", backend="torchvision", longest_edge=512, patch_size=14)
    check_counted(proc, [make_input(real_images, name)], oracle[("small", name)], "image_sizes")


def test_dropins_equal_transformers_in_the_oracle_venv(real_images, tmp_path):
    """AutoImageProcessor gives the torchvision drop-in; both equal transformers' classes.

    For return_tensors "pt", "np" and None (support/hf_pixtral_script.py)."""
    script = Path(__file__).parents[1] / "support" / "hf_pixtral_script.py"
    results = run_with_smg_fast(script, [str(real_images.path(n)) for n in
                                         ("chelsea", "rocket", "logo")], tmp_path)
    assert len(results) == 9 and all(v is True for v in results.values()), results
