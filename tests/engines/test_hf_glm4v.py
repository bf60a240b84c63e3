"""smg_fast.hf's GLM classes where transformers' Glm4v / Glm46V image processors stand.

In the main environment: the PIL drop-ins (Glm4vImageProcessorPil, Glm46VImageProcessorPil)
against transformers' own on real photos and call options, from_pretrained, register() and
AutoImageProcessor, get_number_of_image_patches; the torchvision drop-ins (computed natively,
no torch needed) against transformers' torchvision classes run in the oracle venv. The model
folders carry GLM-4.1V-9B-Thinking's published preprocessor_config.json numbers
(smg_fast.testing.oracles.HUB_GLM).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.tv_oracle import run_oracle
from transformers import AutoImageProcessor
from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING
from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil
from transformers.models.glm46v.image_processing_pil_glm46v import Glm46VImageProcessorPil

import smg_fast.hf as sh
from smg_fast.testing.oracles import glm_kwargs

PAIRS = {"Glm4vImageProcessorPil": Glm4vImageProcessorPil,
         "Glm46VImageProcessorPil": Glm46VImageProcessorPil}


def write_folder(path, model_type: str, named: str, **extra):
    path.mkdir(parents=True)
    pre = {**glm_kwargs("glm4v"), "image_processor_type": named, **extra}
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture(scope="module")
def photos(real_images):
    return [real_images.open(n) for n in ("chelsea", "rocket", "grace_hopper", "logo")] + [
        real_images.rgb("astronaut").crop((0, 0, 5, 3))]


def same(a, b) -> bool:
    return sorted(a.keys()) == sorted(b.keys()) and all(
        np.asarray(a[k]).dtype == np.asarray(b[k]).dtype
        and np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


@pytest.mark.parametrize("name", PAIRS)
def test_pil_classes_equal_transformers(name, tmp_path, photos):
    folder = write_folder(tmp_path / "g", "glm4v", name)
    ours, ref = getattr(sh, name).from_pretrained(folder), PAIRS[name].from_pretrained(folder)
    assert ours.backend == "pil" and ours.size == ref.size
    assert (ours.patch_size, ours.merge_size, ours.temporal_patch_size) == (14, 2, 2)
    for rt in ("np", "pt"):
        assert same(ours(photos, return_tensors=rt), ref(photos, return_tensors=rt))
    for opts in ({"size": {"shortest_edge": 3136, "longest_edge": 300_000}},
                 {"do_rescale": False}, {"patch_size": 16, "merge_size": 1}):
        assert same(ours(photos, return_tensors="np", **opts),
                    ref(photos, return_tensors="np", **opts)), opts


@pytest.mark.parametrize("name", PAIRS)
def test_number_of_image_patches(name):
    ours, ref = getattr(sh, name)(**glm_kwargs("glm4v")), PAIRS[name](**glm_kwargs("glm4v"))
    sizes = [(1, 1), (3, 5), (28, 28), (200, 1), (1080, 1920), (2000, 3000), (11, 2000)]
    for kw in ({}, {"size": {"shortest_edge": 3136, "longest_edge": 200_000}},
               {"patch_size": 16}, {"merge_size": 1, "temporal_patch_size": 1}):
        for h, w in sizes:
            assert ours.get_number_of_image_patches(h, w, kw) == \
                ref.get_number_of_image_patches(h, w, kw), (h, w, kw)


def test_register_maps_the_glm_model_types(tmp_path, photos):
    saved = dict(IMAGE_PROCESSOR_MAPPING._extra_content)
    try:
        done = sh.register()
        assert {"glm4v", "glm4v_moe", "glm_ocr", "glm46v"} <= set(done)
        for mt, name in (("glm4v", "Glm4vImageProcessorPil"),
                         ("glm4v_moe", "Glm4vImageProcessorPil"),
                         ("glm46v", "Glm46VImageProcessorPil")):
            folder = write_folder(tmp_path / mt, mt, name)
            ours = AutoImageProcessor.from_pretrained(folder)
            assert type(ours) is getattr(sh, name)
            assert same(ours(photos, return_tensors="np"),
                        PAIRS[name].from_pretrained(folder)(photos, return_tensors="np"))
    finally:
        IMAGE_PROCESSOR_MAPPING._extra_content.clear()
        IMAGE_PROCESSOR_MAPPING._extra_content.update(saved)


def test_torchvision_classes_equal_transformers(tmp_path, photos):
    jobs = [{"cls": cls, "kwargs": glm_kwargs(cls), "images": photos}
            for cls in ("glm4v", "glm46v")]
    refs = run_oracle(tmp_path / "oracle", jobs)
    for name, ref in zip(("Glm4vImageProcessor", "Glm46VImageProcessor"), refs, strict=True):
        ours = getattr(sh, name)(**glm_kwargs("glm4v"))
        assert ours.backend == "torchvision"
        out = ours(photos, return_tensors="np")
        assert np.array_equal(out["image_grid_thw"], ref["grid"])
        assert np.array_equal(out["pixel_values"], ref["pixel_values"])
