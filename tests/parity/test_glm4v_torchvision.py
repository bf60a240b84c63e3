"""GLM-4.1V / 4.5V / 4.6V / GLM-OCR against transformers' torchvision classes.

Glm4vImageProcessor and Glm46VImageProcessor from transformers 5.24 (torch 2.14.1, torchvision
0.29.1) run in the oracle venv (tests/support/tv_oracle.py), configured as GLM-4.1V-9B-Thinking's
published preprocessor_config.json (smg_fast.testing.oracles.HUB_GLM), against smg-fast loaded
from model folders naming those classes (so the torchvision backend, as transformers'
AutoImageProcessor resolves it): real photos, PIL modes, arrays, encoded bytes (EXIF-rotated
JPEG, 16-bit PNG, RGBA PNG), tiny and extreme-aspect sizes, a batch; float32 and bfloat16 bits,
np.array_equal.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES, encode
from support.tv_oracle import run_oracle
from transformers.image_utils import load_image

from smg_fast import load_processor
from smg_fast.testing.oracles import glm_kwargs

# model_type -> (the oracle script's class key, the class its preprocessor_config.json names)
MODELS = {"glm4v": ("glm4v", "Glm4vImageProcessor"), "glm4v_moe": ("glm4v", "Glm4vImageProcessor"),
          "glm_ocr": ("glm4v", "Glm4vImageProcessor"), "glm46v": ("glm46v", "Glm46VImageProcessor")}
SIZES = ((1, 1), (5, 3), (27, 29), (37, 53), (1920, 1080), (3840, 2160), (1, 200), (200, 1),
         (13, 1100), (2000, 11), (640, 427))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS]
          + ["np_rgba", "np_grey", "bytes:exif", "bytes:png16", "bytes:rgba_png"])
# every input on GLM-4.1V's class; a cross-section on the other model types' folders
CASES = ([("glm4v", name) for name in INPUTS]
         + [(mt, name) for mt in ("glm4v_moe", "glm_ocr", "glm46v")
            for name in ("real:chelsea", "real:logo2", "size:1x1", "size:1920x1080",
                         "bytes:exif")])
BATCH = ["size:37x53", "real:chelsea", "size:37x53", "mode:RGBA", "size:5x3"]


def make_input(images, exif_jpeg, name: str):
    """A named input: a PIL image, a numpy array, or encoded bytes (kind "bytes")."""
    kind, _, arg = name.partition(":")
    if kind == "bytes":
        if arg == "exif":
            return exif_jpeg.read_bytes()
        return encode(images.mode_image("I;16" if arg == "png16" else "RGBA"), "PNG")
    arrays = {"np_rgba": lambda: np.asarray(images.mode_image("RGBA")).copy(),
              "np_grey": lambda: np.asarray(images.open("camera"))[:, :, None].copy()}
    if kind in arrays:
        return arrays[kind]()
    if kind == "size":
        return images.rgb("astronaut").resize(tuple(int(v) for v in arg.split("x")))
    return images.open(arg) if kind == "real" else images.mode_image(arg)


def for_transformers(item):
    """What transformers' class gets: encoded bytes through its load_image."""
    if isinstance(item, bytes):
        return load_image(base64.b64encode(item).decode("ascii"))
    return item


@pytest.fixture(scope="module")
def oracle(real_images, exif_rotated_jpeg, tmp_path_factory):
    jobs, keys = [], []
    for mt, name in CASES:
        cls = MODELS[mt][0]
        keys.append((mt, name))
        jobs.append({"cls": cls, "kwargs": glm_kwargs(cls), "images": [
            for_transformers(make_input(real_images, exif_rotated_jpeg, name))]})
    keys.append(("glm4v", "batch"))
    jobs.append({"cls": "glm4v", "kwargs": glm_kwargs("glm4v"), "images": [
        for_transformers(make_input(real_images, exif_rotated_jpeg, n)) for n in BATCH]})
    results = run_oracle(tmp_path_factory.mktemp("tv_glm"), jobs)
    return dict(zip(keys, results, strict=True))


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    """glm(model_type) -> smg-fast loaded from a model folder naming the torchvision class."""
    root = tmp_path_factory.mktemp("glm_tv")
    procs = {}
    for mt, (cls, named) in MODELS.items():
        folder = root / mt
        folder.mkdir()
        (folder / "preprocessor_config.json").write_text(
            json.dumps({**glm_kwargs(cls), "image_processor_type": named}))
        (folder / "config.json").write_text(json.dumps({"model_type": mt}))
        procs[mt] = load_processor(folder, max_image_pixels=None)
        assert procs[mt].config.backend == "torchvision"
    return procs.__getitem__


def check(proc, images, ref) -> None:
    out = proc(images, return_tensors="np")
    assert np.asarray(out["image_grid_thw"]).tolist() == ref["grid"].tolist()
    pv = np.asarray(out["pixel_values"])
    assert pv.shape == ref["pixel_values"].shape and pv.dtype == np.float32
    bad = pv != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    bf = np.asarray(proc(images, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert bf.dtype == np.uint16 and np.array_equal(bf, ref["bf16"]), "bfloat16 bits differ"


@pytest.mark.parametrize("model_type,name", CASES)
def test_glm_exact(model_type, name, real_images, exif_rotated_jpeg, glm, oracle):
    check(glm(model_type), [make_input(real_images, exif_rotated_jpeg, name)],
          oracle[(model_type, name)])


def test_glm_batch(real_images, exif_rotated_jpeg, glm, oracle):
    check(glm("glm4v"), [make_input(real_images, exif_rotated_jpeg, n) for n in BATCH],
          oracle[("glm4v", "batch")])
