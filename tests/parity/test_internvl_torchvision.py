"""InternVL with backend="torchvision" against transformers' GotOcr2ImageProcessor.

transformers 5.24 with torch and torchvision 0.29.1 in the oracle venv (tests/support/tv_oracle.py),
configured as OpenGVLab/InternVL3-1B-hf's preprocessor_config.json (HUB_INTERNVL): torch's uint8
antialiased BICUBIC resize onto the tile canvas and of the thumbnail, then the fused rescale +
normalize. Real photos, every PIL mode, numpy inputs, tiny / 1080p / 4K / extreme-aspect and
tie sizes, a batch, other tile bounds, float32 and bfloat16 bits, compared with
np.array_equal (num_patches where the grid is); the oracle runs once for the module."""

from __future__ import annotations

import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle
from test_torchvision_parity import check_counted, make_input

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_INTERNVL

SIZES = ((1, 1), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1), (4000, 25),
         (448, 448), (1344, 1344), (896, 448), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:retina"]
OTHER = {"fewer": {**HUB_INTERNVL, "min_patches": 2, "max_patches": 6},
         "off": {**HUB_INTERNVL, "crop_to_patches": False}}
OTHER_INPUTS = ["real:coffee", "size:1920x1080", "size:4000x25"]
# (config, input) -> (transformers' constructor arguments, the images of one call)
CASES = {("hub", n): (HUB_INTERNVL, [n]) for n in INPUTS}
CASES[("hub", "batch")] = (HUB_INTERNVL, BATCH)
CASES.update({(o, n): (kw, [n]) for o, kw in OTHER.items() for n in OTHER_INPUTS})


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    jobs = [{"cls": "internvl", "kwargs": kwargs,
             "images": [make_input(real_images, n) for n in names]}
            for kwargs, names in CASES.values()]
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_internvl"), jobs)
    return dict(zip(CASES, results, strict=True))


@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_internvl_exact(case, real_images, oracle):
    """Every case of CASES: the hub config on each input and a batch, and other tilings."""
    kwargs, names = CASES[case]
    proc = load_processor("internvl", backend="torchvision", max_image_pixels=None,
                          **{k: kwargs[k] for k in ("crop_to_patches", "min_patches",
                                                    "max_patches")})
    if case == ("hub", "batch"):  # retina: 3x3 tiles (the tie rule) and the thumbnail
        assert oracle[case]["grid"].tolist()[4] == 10
    check_counted(proc, [make_input(real_images, n) for n in names], oracle[case], "num_patches")
