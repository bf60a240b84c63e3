"""Models whose image processor is Qwen2-VL's with other numbers: their model folders just load.

dots.ocr, Qwen2.5-Omni, Qwen3-Omni and Qwen3.5 (dense and MoE) name transformers'
Qwen2VLImageProcessor in their preprocessor_config.json; their config.json model_type picks a
Qwen family, and the folder's numbers win. Each folder is loaded with ``load_processor(folder)``
and compared with np.array_equal against transformers' PIL class (here) and its torchvision
class (the oracle venv), both built from the same preprocessor_config.json, on real photos and
edge inputs; ``smg_fast.hf.register()`` maps the model types that transformers knows.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support.images import encode
from support.tv_oracle import run_oracle
from transformers.image_utils import load_image

from smg_fast import load_processor
from smg_fast.testing.oracles import CLIP_MEAN, CLIP_STD

_QWEN_TV = "Qwen2VLImageProcessor"
# model_type -> (its published preprocessor_config.json, the family it joins). The vision
# numbers (patch, merge, temporal) are the vision-encoder defaults in transformers 5.24's
# models/<model_type>/configuration_*.py where transformers has the model; the pixel budgets and
# mean/std are the checkpoints' published configs (dots.ocr is remote code only: its
# rednote-hilab/dots.ocr preprocessor_config.json, temporal patch 1).
RELATIVES = {
    "dots_ocr": (dict(min_pixels=3136, max_pixels=11289600, patch_size=14, temporal_patch_size=1,
                      merge_size=2, image_mean=CLIP_MEAN, image_std=CLIP_STD), "qwen2_vl"),
    # Qwen/Qwen2.5-Omni-7B: configuration_qwen2_5_omni.py's vision encoder (patch 14).
    "qwen2_5_omni": (dict(min_pixels=3136, max_pixels=12845056, patch_size=14,
                          temporal_patch_size=2, merge_size=2, image_mean=CLIP_MEAN,
                          image_std=CLIP_STD), "qwen2_5_vl"),
    # Qwen/Qwen3-Omni-30B-A3B-Instruct: configuration_qwen3_omni_moe.py's (patch 16).
    "qwen3_omni_moe": (dict(min_pixels=3136, max_pixels=12845056, patch_size=16,
                            temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                            image_std=[0.5] * 3), "qwen3_vl"),
    # Qwen/Qwen3.5 checkpoints: configuration_qwen3_5.py's (patch 16), Qwen3-VL's budget.
    "qwen3_5": (dict(size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16,
                     temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                     image_std=[0.5] * 3), "qwen3_vl"),
    "qwen3_5_moe": (dict(size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16,
                         temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                         image_std=[0.5] * 3), "qwen3_vl"),
}
INPUTS = ("photo:rocket", "photo:chelsea", "photo:hubble", "photo:logo2", "grey:camera",
          "png16", "exif", "tiny:1x1", "tiny:5x3", "aspect:1x200", "aspect:300x2")


def encoded(real_images, exif_jpeg, name: str) -> bytes:
    """The encoded bytes of a named input: real photos as shipped, crops and modes as PNG."""
    kind, _, arg = name.partition(":")
    if kind in ("photo", "grey"):
        return real_images.bytes(arg)
    if kind == "png16":
        return encode(real_images.mode_image("I;16"), "PNG")
    if kind == "exif":
        return exif_jpeg.read_bytes()
    w, h = (int(v) for v in arg.split("x"))
    return encode(real_images.rgb("astronaut").crop((100, 50, 100 + w, 50 + h)), "PNG")


def loaded(data: bytes):
    """The image transformers' processors get for encoded bytes (its load_image)."""
    return load_image(base64.b64encode(data).decode("ascii"))


def write_folder(path, model_type: str, pre: dict, named: str = _QWEN_TV):
    path.mkdir(parents=True, exist_ok=True)
    (path / "preprocessor_config.json").write_text(
        json.dumps({**pre, "image_processor_type": named}))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("relatives")
    return {mt: write_folder(root / mt, mt, pre) for mt, (pre, _) in RELATIVES.items()}


def check(out, ref_pv, ref_grid) -> None:
    grid = np.asarray(out["image_grid_thw"])
    assert grid.tolist() == np.asarray(ref_grid).tolist()
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32 and pv.shape == np.asarray(ref_pv).shape
    assert np.array_equal(pv, np.asarray(ref_pv))


@pytest.mark.parametrize("model_type", RELATIVES)
def test_folder_joins_its_family_with_its_numbers(model_type, folders):
    pre, family = RELATIVES[model_type]
    proc = load_processor(folders[model_type])
    cfg = proc.config
    assert cfg.family == family and cfg.backend == "torchvision"
    size = pre.get("size", {})
    assert cfg.min_pixels == size.get("shortest_edge", pre.get("min_pixels"))
    assert cfg.max_pixels == size.get("longest_edge", pre.get("max_pixels"))
    assert (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size) == \
        (pre["patch_size"], pre["merge_size"], pre["temporal_patch_size"])
    assert list(cfg.image_mean) == pre["image_mean"] and list(cfg.image_std) == pre["image_std"]


@pytest.mark.parametrize("name", INPUTS)
@pytest.mark.parametrize("model_type", RELATIVES)
def test_exact_to_the_pil_class(model_type, name, folders, real_images, exif_rotated_jpeg,
                                hf_run):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    pre = RELATIVES[model_type][0]
    data = encoded(real_images, exif_rotated_jpeg, name)
    ref_pv, ref_grid = hf_run(Qwen2VLImageProcessorPil(**pre), loaded(data))
    proc = load_processor(folders[model_type], backend="pil")
    check(proc(data, return_tensors="np"), ref_pv, ref_grid)
    # transformers' pixel_values shape is [cells, 3 * temporal * patch^2]
    p, t = pre["patch_size"], pre["temporal_patch_size"]
    assert np.asarray(ref_pv).shape[1] == 3 * t * p * p


@pytest.fixture(scope="module")
def oracle(real_images, exif_rotated_jpeg, tmp_path_factory):
    jobs, keys = [], []
    for mt, (pre, _) in RELATIVES.items():
        for name in INPUTS:
            keys.append((mt, name))
            jobs.append({"cls": "qwen", "kwargs": pre,
                         "images": [loaded(encoded(real_images, exif_rotated_jpeg, name))]})
    results = run_oracle(tmp_path_factory.mktemp("tv_relatives"), jobs)
    return dict(zip(keys, results, strict=True))


@pytest.mark.parametrize("name", INPUTS)
@pytest.mark.parametrize("model_type", RELATIVES)
def test_exact_to_the_torchvision_class(model_type, name, folders, real_images,
                                        exif_rotated_jpeg, oracle):
    ref = oracle[(model_type, name)]
    proc = load_processor(folders[model_type])  # the folder names the torchvision class
    data = encoded(real_images, exif_rotated_jpeg, name)
    check(proc(data, return_tensors="np"), ref["pixel_values"], ref["grid"])
    bf = np.asarray(proc(data, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert np.array_equal(bf, ref["bf16"])


def test_register_maps_the_relatives(tmp_path, real_images):
    """smg_fast.hf.register() (and the engine plug-ins through it) maps their model types."""
    from transformers import AutoImageProcessor
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from smg_fast import hf

    saved = dict(IMAGE_PROCESSOR_MAPPING._extra_content)
    try:
        done = hf.register()
        # dots_ocr is remote code: transformers has no config class to map
        assert {"qwen2_5_omni", "qwen3_omni_moe", "qwen3_5", "qwen3_5_moe"} <= set(done)
        assert "dots_ocr" not in done
        photo = real_images.open("chelsea")
        for mt in ("qwen2_5_omni", "qwen3_5"):
            pre = RELATIVES[mt][0]
            folder = write_folder(tmp_path / mt, mt, pre, "Qwen2VLImageProcessorPil")
            ours = AutoImageProcessor.from_pretrained(folder)
            assert type(ours) is hf.Qwen2VLImageProcessorPil
            out = ours(photo, return_tensors="np")
            ref = Qwen2VLImageProcessorPil(**pre)(photo, return_tensors="np")
            check(out, ref["pixel_values"], ref["image_grid_thw"])
    finally:
        IMAGE_PROCESSOR_MAPPING._extra_content.clear()
        IMAGE_PROCESSOR_MAPPING._extra_content.update(saved)
