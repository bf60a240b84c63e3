"""Bit-exact parity of the Gemma 3n processor with transformers' SiglipImageProcessorPil.

Gemma 3n's checkpoints name SiglipImageProcessorFast; google/gemma-3n-E4B-it's published
preprocessor_config.json (smg_fast.testing.oracles' HUB_GEMMA3N, written out apart from the family
module): size 768x768, BILINEAR, rescale 1/255, do_normalize false (mean = std = 0.5 kept).
pixel_values (N, 3, 768, 768) float32 compared with np.array_equal on real photos, every PIL
mode, encoded bytes and paths, an EXIF-rotated JPEG, a 16-bit PNG, numpy arrays and edge sizes;
through load_processor (by name and from a model folder) and the smg_fast.hf drop-in. The
torchvision backend: test_gemma4_torchvision.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.input_cases import array_cases, encoded_cases
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

from smg_fast import load_processor
from smg_fast.testing.oracles import HUB_GEMMA3N, hf_gemma3n

# The published preprocessor_config.json (google/gemma-3n-E4B-it), image keys as a folder has them
HUB_FILE = {"image_processor_type": "SiglipImageProcessorFast",
            "processor_class": "Gemma3nProcessor", "do_convert_rgb": True,
            "do_normalize": False, "do_rescale": True, "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "image_seq_length": 256,
            "resample": 2, "rescale_factor": 0.00392156862745098,
            "size": {"height": 768, "width": 768}}


@pytest.fixture(scope="module")
def gemma():
    return load_processor("gemma3n")


def reference(ref, images, **kw) -> np.ndarray:
    return np.asarray(ref(images, return_tensors="np", **kw)["pixel_values"])


@pytest.fixture(scope="module")
def ref():  # transformers' class, as the hub config sets it
    return hf_gemma3n(SiglipImageProcessorPil)


def check(out, want) -> None:
    got = np.asarray(out["pixel_values"])
    assert got.dtype == np.float32 and got.shape == want.shape, (got.shape, want.shape)
    bad = got != want
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"


def test_builtin_is_the_hub_config(gemma):
    cfg = gemma.config
    assert (cfg.patch_size, cfg.resample, cfg.backend, cfg.do_normalize) == (768, 2, "pil", False)
    assert list(cfg.image_mean) == HUB_GEMMA3N["image_mean"]
    assert gemma.num_tokens(1920, 1080) == 256  # Gemma3nProcessor's image_seq_length


def test_real_image(real_image_name, real_images, gemma, ref):
    check(gemma(real_images.open(real_image_name)),
          reference(ref, real_images.open(real_image_name)))


def test_pil_mode(mode_kind, real_images, gemma, ref):
    want = reference(ref, real_images.mode_image(mode_kind))
    check(gemma(real_images.mode_image(mode_kind)), want)


def test_encoded_inputs(real_images, exif_rotated_jpeg, gemma, ref):
    """Bytes and paths (EXIF-rotated, 16-bit PNG too) load as transformers' load_image does."""
    for _, ours, theirs in encoded_cases(real_images, exif_rotated_jpeg):
        check(gemma(ours), reference(ref, theirs))


def test_arrays(real_images, gemma, ref):
    for _, arr, kw in array_cases(real_images, [(1, 1), (37, 53), (768, 768), (1920, 1080),
                                                (1, 500), (4000, 25)]):
        check(gemma(arr, **kw), reference(ref, arr, **kw))


@pytest.mark.parametrize("kw", [{"do_normalize": True}, {"size": {"height": 224, "width": 224}},
                                {"resample": 3}], ids=str)
def test_call_options(kw, real_images, gemma, ref):
    im = real_images.open("coffee")
    check(gemma([im, real_images.open("camera")], **kw),
          reference(ref, [im, real_images.open("camera")], **kw))


def test_model_folder_and_dropin(tmp_path, real_images, ref):
    import smg_fast.hf as hf

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3n"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    # SiglipImageProcessorFast is the torchvision class in transformers 5
    assert load_processor(tmp_path).config.backend == "torchvision"
    proc = load_processor(tmp_path, backend="pil")
    assert (proc.config.family, proc.config.do_normalize) == ("gemma3n", False)
    def images():
        return [real_images.open("grace_hopper"), real_images.open("camera")]

    check(proc(images()), reference(ref, images()))
    ours = hf.SiglipImageProcessorPil.from_pretrained(tmp_path)
    theirs = SiglipImageProcessorPil.from_pretrained(tmp_path)
    assert ours.model_input_names == theirs.model_input_names == ["pixel_values"]
    for key in ("do_normalize", "resample", "rescale_factor", "size"):
        assert getattr(ours, key) == getattr(theirs, key), key
    assert list(ours.image_mean) == list(theirs.image_mean)
    out = ours(images(), return_tensors="np")
    assert set(out) == {"pixel_values"}
    check(out, reference(theirs, images()))
    check(ours(images(), return_tensors="np", do_normalize=True),
          reference(theirs, images(), do_normalize=True))
    bare, theirs_bare = ours(images())["pixel_values"], theirs(images())["pixel_values"]
    assert isinstance(bare, list) and isinstance(theirs_bare, list)  # no tensor type: as there
    assert all(np.array_equal(a, b) for a, b in zip(bare, theirs_bare, strict=True))
    assert ours._reference is None  # transformers' class was never needed
