"""LLaVA-NeXT and OneVision with backend="torchvision" against transformers' torchvision classes.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py): LlavaNextImageProcessor and LlavaOnevisionImageProcessor configured
as the published llava-hf preprocessor_config.json values (HUB_LLAVA): torch's uint8 antialiased
BICUBIC resize fitted inside the best pinpoint, centred zero padding, the squashed base tile, the
fused rescale + normalize, zero tiles padding the batch. Real photos, every PIL mode, numpy
inputs, tiny / 1080p / 4000x3000 / extreme-aspect sizes and a batch of mixed tile counts, in
float32 and bfloat16 bits, compared with np.array_equal; the oracle runs once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle, run_with_smg_fast
from test_torchvision_parity import check_counted, make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_LLAVA

FAMILIES = ("llava_next", "llava_onevision")
SIZES = ((1, 1), (37, 53), (336, 336), (1920, 1080), (1080, 1920), (4000, 3000), (1, 200),
         (200, 1), (4000, 25), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:900x37", "mode:RGBA", "real:coffee"]


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    keys, jobs = [], []
    for fam in FAMILIES:
        for name in [*INPUTS, "batch"]:
            keys.append((fam, name))
            names = BATCH if name == "batch" else [name]
            jobs.append({"cls": fam, "kwargs": HUB_LLAVA[fam],
                         "images": [make_input(real_images, n) for n in names]})
    keys.append(("llava_onevision", "samples"))  # a multi-image sample: mean-colour squares
    jobs.append({"cls": "llava_onevision", "kwargs": HUB_LLAVA["llava_onevision"],
                 "images": [[make_input(real_images, n) for n in BATCH[:1]],
                            [make_input(real_images, n) for n in BATCH[1:]]]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_llava"), jobs)
    return dict(zip(keys, results, strict=True))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", INPUTS)
def test_llava_exact(family, name, real_images, oracle):
    proc = load_processor(family, backend="torchvision", max_image_pixels=None)
    check_counted(proc, [make_input(real_images, name)], oracle[(family, name)], "image_sizes")


@pytest.mark.parametrize("family", FAMILIES)
def test_llava_batch_pads_tiles_with_zeros_exact(family, real_images, oracle):
    proc = load_processor(family, backend="torchvision")
    ref = oracle[(family, "batch")]
    images = [make_input(real_images, n) for n in BATCH]
    check_counted(proc, images, ref, "image_sizes")
    counts = [proc.plan(*(ref["grid"][i][::-1])).rows for i in range(len(BATCH))]
    assert len(set(counts)) > 1
    short = counts.index(min(counts))
    assert not ref["pixel_values"][short, min(counts):].any()


def test_dropins_equal_transformers_in_the_oracle_venv(real_images, tmp_path):
    """AutoImageProcessor gives the torchvision drop-ins; all four equal transformers' classes.

    For return_tensors "pt", "np" and None (support/hf_llava_script.py)."""
    script = Path(__file__).parents[1] / "support" / "hf_llava_script.py"
    results = run_with_smg_fast(script, [str(real_images.path(n)) for n in
                                         ("chelsea", "rocket", "logo")], tmp_path)
    assert len(results) == 18 and all(v is True for v in results.values()), results


def test_onevision_multi_image_sample_exact(real_images, oracle):
    proc = load_processor("llava_onevision", backend="torchvision")
    images = [[make_input(real_images, n) for n in BATCH[:1]],
              [make_input(real_images, n) for n in BATCH[1:]]]
    check_counted(proc, images, oracle[("llava_onevision", "samples")], "image_sizes")
