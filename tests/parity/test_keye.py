"""Keye-VL-8B-Preview folders: its remote-code image processor is PaddleOCR-VL's computation.

A folder like Kwai-Keye/Keye-VL-8B-Preview's (config.json model_type ``Keye``, a
preprocessor_config.json whose auto_map names ``image_processing_keye.SiglipImageProcessor``)
loads as the ``keye`` family, PIL numerics, with the remote class's defaults for what it lacks
(101920 .. 1003520 pixels, patch 14, merge 2, temporal 1, CLIP mean / std: no published file
was at hand, so the test writes those defaults out, and a folder's own values win). The
reference is transformers' PaddleOCRVLImageProcessorPil built with the same numbers, which
computes what Keye's remote class computes (short-side upscale, Qwen's smart_resize, BICUBIC,
float32 rescale / normalize, raster [N, 3, 14, 14] patches), on real photos and edge inputs
loaded from bytes as transformers' load_image does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from parity.test_qwen_relatives import INPUTS, check, encoded, loaded
from transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl import (
    PaddleOCRVLImageProcessorPil,
)

from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError
from smg_fast.testing.oracles import CLIP_MEAN, CLIP_STD

KEYE = dict(min_pixels=28 * 28 * 130, max_pixels=28 * 28 * 1280, patch_size=14,
            temporal_patch_size=1, merge_size=2, image_mean=CLIP_MEAN, image_std=CLIP_STD,
            resample=3, do_convert_rgb=True, do_rescale=True, do_normalize=True,
            rescale_factor=1 / 255)
AUTO_MAP = {"AutoImageProcessor": "image_processing_keye.SiglipImageProcessor",
            "AutoProcessor": "processing_keye.KeyeProcessor"}


def write_folder(path, model_type: str = "Keye", **pre):
    path.mkdir(parents=True, exist_ok=True)
    (path / "preprocessor_config.json").write_text(json.dumps(
        {**KEYE, **pre, "auto_map": AUTO_MAP, "image_processor_type": "SiglipImageProcessor"}))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture(scope="module")
def keye(tmp_path_factory):
    return load_processor(write_folder(tmp_path_factory.mktemp("Keye-VL-8B-Preview")))


def reference(**numbers):
    kw = {**KEYE, **numbers}
    return PaddleOCRVLImageProcessorPil(
        size={"shortest_edge": kw["min_pixels"], "longest_edge": kw["max_pixels"]},
        patch_size=kw["patch_size"], temporal_patch_size=1, merge_size=kw["merge_size"],
        image_mean=kw["image_mean"], image_std=kw["image_std"])


def test_folder_is_keye_on_pil(keye):
    cfg = keye.config
    assert (cfg.family, cfg.backend) == ("keye", "pil")
    assert (cfg.min_pixels, cfg.max_pixels) == (KEYE["min_pixels"], KEYE["max_pixels"])
    assert (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size) == (14, 2, 1)
    assert list(cfg.image_mean) == CLIP_MEAN and list(cfg.image_std) == CLIP_STD


@pytest.mark.parametrize("name", INPUTS)
def test_exact(name, keye, real_images, exif_rotated_jpeg, hf_run):
    data = encoded(real_images, exif_rotated_jpeg, name)
    ref_pv, ref_grid = hf_run(reference(), loaded(data))
    out = keye(data, return_tensors="np")
    check(out, ref_pv, ref_grid)
    assert np.asarray(out["pixel_values"]).shape[1:] == (3, 14, 14)


def test_folder_values_win_and_model_type_is_not_needed(tmp_path, real_images, hf_run):
    """Another budget and mean / std in the folder; config.json's model_type unknown."""
    numbers = dict(min_pixels=3136, max_pixels=200704, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    proc = load_processor(write_folder(tmp_path, "keye_unknown", **numbers))
    assert proc.config.family == "keye" and proc.config.max_pixels == 200704
    data = real_images.bytes("hubble")
    check(proc(data, return_tensors="np"), *hf_run(reference(**numbers), loaded(data)))


def test_call_budget_refused(keye, real_images):
    """The remote class ignores a call's size: refused rather than applied."""
    with pytest.raises((UnsupportedCallError, ValueError)):
        keye(real_images.open("rocket"), size={"shortest_edge": 3136, "longest_edge": 50176})


def test_siglip_folder_without_keye_code_is_not_keye(tmp_path):
    """transformers' own SiglipImageProcessor (fixed-size) is another computation."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "SiglipImageProcessor", "size": {"height": 384, "width": 384}}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "siglip"}))
    with pytest.raises(ValueError):
        load_processor(tmp_path)
