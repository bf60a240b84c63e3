"""backend="torchvision" of PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR against transformers'.

PaddleOCRVLImageProcessor, Ernie4_5_VLMoeImageProcessor and HunYuanVLImageProcessor from
transformers 5.24 with torchvision 0.29.1, in their venv (tests/support/tv_oracle.py), configured
from each family's hub config (smg_fast.testing.oracles.HUB_QWEN_LIKE): real photos, every PIL
mode, numpy RGBA and grey arrays, tiny / thin / 1080p / extreme-aspect sizes and a batch, float32
and bfloat16 bits compared with np.array_equal, by name and from a model folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from parity.test_torchvision_parity import check, make_input
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_QWEN_LIKE, QWEN_LIKE_CLASSES, qwen_like_kwargs

FAMILIES = tuple(HUB_QWEN_LIKE)
SIZES = ((1, 1), (37, 53), (5, 300), (300, 5), (2, 390), (27, 27), (13, 1100), (1920, 1080),
         (4000, 25), (1, 200), (200, 1))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS] + ["np_rgba", "np_grey"])
CASES = [(f, i) for f in FAMILIES for i in INPUTS]
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "real:coffee"]


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    jobs, keys = [], []
    for fam, name in CASES:
        keys.append((fam, name))
        jobs.append({"cls": fam, "kwargs": qwen_like_kwargs(fam),
                     "images": [make_input(real_images, name)]})
    for fam in FAMILIES:
        keys.append((fam, "batch"))
        jobs.append({"cls": fam, "kwargs": qwen_like_kwargs(fam),
                     "images": [make_input(real_images, n) for n in BATCH]})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_qwen_like"), jobs)
    return dict(zip(keys, results, strict=True))


@pytest.mark.parametrize("family,name", CASES)
def test_exact(family, name, real_images, oracle):
    proc = load_processor(family, backend="torchvision", max_image_pixels=None)
    check(proc, [make_input(real_images, name)], oracle[(family, name)])


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_exact(family, real_images, oracle):
    """Several images in one call (transformers groups same-size images into one resize)."""
    proc = load_processor(family, backend="torchvision")
    check(proc, [make_input(real_images, n) for n in BATCH], oracle[(family, "batch")])


@pytest.mark.parametrize("family", FAMILIES)
def test_model_folder_resolves_torchvision(family, tmp_path, real_images, oracle):
    hub = HUB_QWEN_LIKE[family]
    pre = {"image_processor_type": QWEN_LIKE_CLASSES[family][1], "min_pixels": hub["min_pixels"],
           "max_pixels": hub["max_pixels"], "patch_size": hub["patch_size"], "merge_size": 2,
           "temporal_patch_size": 1, "image_mean": hub["mean"], "image_std": hub["std"],
           "resample": hub["resample"]}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": family}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    proc = load_processor(tmp_path)
    assert proc.config.backend == "torchvision" and proc.config.family == family
    check(proc, [make_input(real_images, "real:chelsea")], oracle[(family, "real:chelsea")])


def test_hunyuan_tv_refuses_no_resample_it_ignores():
    """transformers' HunYuanVL classes resize BICUBIC whatever resample says; so does this one."""
    proc = load_processor("hunyuan_vl", backend="torchvision")
    assert proc.config.resample == 3
    out = proc(np.zeros((40, 40, 3), np.uint8), resample=1)
    assert np.asarray(out["pixel_values"]).shape[1] == 3 * 16 * 16
