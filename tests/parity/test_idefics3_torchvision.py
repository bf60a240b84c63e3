"""Idefics3 / SmolVLM with backend="torchvision" against transformers' torchvision classes.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py): torch's uint8 antialiased LANCZOS for the three chained resizes,
then the fused rescale + normalize. Configured as the published Idefics3-8B, SmolVLM-Instruct and
SmolVLM2 preprocessor_config.json (smg_fast.testing.model_folders_idefics3). Real photos, every
PIL mode, numpy RGBA and grey, tiny / 1080p / 4000x3000 / extreme-aspect sizes, nested batches
padded with zero frames; pixel_values (float32 and bfloat16 bits), pixel_attention_mask and
rows / cols compared exactly; the oracle runs once for the module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle, run_with_smg_fast
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.testing.model_folders_idefics3 import (
    IDEFICS3,
    SMOLVLM2,
    SMOLVLM_INSTRUCT,
    hub_kwargs,
    make_idefics3_folder,
)

SIZES = ((1, 1), (37, 53), (1920, 1080), (1080, 1920), (4000, 3000), (1, 200), (4000, 25),
         (364, 364), (365, 364), (13, 1100))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
OTHER_INPUTS = ["real:coffee", "size:1920x1080", "size:4000x25", "mode:LA"]
# (checkpoint, input) -> (checkpoint, images: names, or lists of names for a nested batch)
CASES = {(IDEFICS3, n): (IDEFICS3, [n]) for n in INPUTS}
CASES[(IDEFICS3, "batch")] = (IDEFICS3, [["size:37x53", "real:chelsea"], ["mode:RGBA"],
                                         ["real:retina", "size:4000x25", "real:coffee"]])
CASES.update({(c, n): (c, [n]) for c in (SMOLVLM_INSTRUCT, SMOLVLM2) for n in OTHER_INPUTS})
CASES[(SMOLVLM2, "batch")] = (SMOLVLM2, [["real:chelsea"], ["size:1x200", "real:camera"]])
_CLS = {IDEFICS3: "idefics3", SMOLVLM_INSTRUCT: "idefics3", SMOLVLM2: "smolvlm"}


def _images(real_images, names):
    return [[make_input(real_images, n) for n in s] if isinstance(s, list)
            else make_input(real_images, s) for s in names]


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    jobs = [{"cls": _CLS[c], "kwargs": hub_kwargs(c), "images": _images(real_images, names)}
            for c, names in CASES.values()]
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_idefics3"), jobs)
    return dict(zip(CASES, results, strict=True))


def check(proc, images, ref) -> None:
    out = proc(images, return_tensors="np", return_row_col_info=True)
    pv = np.asarray(out["pixel_values"])
    assert pv.shape == ref["pixel_values"].shape, (pv.shape, ref["pixel_values"].shape)
    assert pv.dtype == np.float32
    bad = pv != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    mask = out["pixel_attention_mask"]
    assert mask.dtype == np.int64 and np.array_equal(mask, ref["grid"])
    assert [out["rows"], out["cols"]] == json.loads(str(ref["rowcol"]))
    bf = np.asarray(proc(images, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert bf.dtype == np.uint16 and np.array_equal(bf, ref["bf16"]), "bfloat16 bits differ"


@pytest.fixture(scope="module")
def procs(tmp_path_factory):
    root = tmp_path_factory.mktemp("idefics3_folders")
    return {c: load_processor(make_idefics3_folder(root / c, c), max_image_pixels=None)
            for c in _CLS}


@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_idefics3_exact(case, real_images, oracle, procs):
    """Every case of CASES: each checkpoint's folder (torchvision by its class name)."""
    checkpoint, names = CASES[case]
    proc = procs[checkpoint]
    assert proc.config.backend == "torchvision" and proc.config.family == _CLS[checkpoint]
    check(proc, _images(real_images, names), oracle[case])


def test_dropins_equal_transformers_in_the_oracle_venv(real_images, tmp_path):
    """AutoImageProcessor gives the torchvision drop-in; both drop-ins equal transformers'.

    For return_tensors "pt", "np" and None, a nested batch with rows / cols, each checkpoint's
    folder (support/hf_idefics3_script.py)."""
    script = Path(__file__).parents[1] / "support" / "hf_idefics3_script.py"
    results = run_with_smg_fast(script, [str(real_images.path(n)) for n in
                                         ("chelsea", "rocket", "logo")], tmp_path)
    assert len(results) == 18 and all(v is True for v in results.values()), results
