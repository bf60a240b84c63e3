"""Bit-exact parity of the Gemma 4 processor with transformers' Gemma4ImageProcessorPil.

Configured as transformers' Gemma4ImageProcessor class defaults, which the published google/gemma-4
checkpoints hold (smg_fast.testing.oracles' HUB_GEMMA4, written out apart from the family
module): patch 16, pooling 3, 280 soft tokens, BICUBIC, rescale 1/255, no normalization.
pixel_values (N, 2520, 768) float32, image_position_ids (N, 2520, 2) int64 and
num_soft_tokens_per_image are compared with np.array_equal, on real photos, every PIL mode,
encoded bytes and paths, an EXIF-rotated JPEG, a 16-bit PNG, numpy arrays and edge sizes
(tiny, extreme aspect, already at a budget size); through load_processor (by name and from a
model folder) and the smg_fast.hf drop-in."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.input_cases import array_cases, encoded_cases
from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

from smg_fast import load_processor
from smg_fast.errors import InvalidImageError
from smg_fast.testing.oracles import HUB_GEMMA4, hf_gemma4

KEYS = ("pixel_values", "image_position_ids", "num_soft_tokens_per_image")
# A model folder's preprocessor_config.json with the published values
HUB_FILE = {"image_processor_type": "Gemma4ImageProcessor", "processor_class": "Gemma4Processor",
            "do_resize": True, "do_rescale": True, "do_convert_rgb": True,
            **{k: v for k, v in HUB_GEMMA4.items()}, "rescale_factor": 0.00392156862745098}


@pytest.fixture(scope="module")
def ref():
    return hf_gemma4(Gemma4ImageProcessorPil)


@pytest.fixture(scope="module")
def gemma():
    return load_processor("gemma4")


def reference(ref, images, **kw) -> dict[str, np.ndarray]:
    out = ref(images, return_tensors="np", **kw)
    return {k: np.asarray(out[k]) for k in KEYS}


def check(out, want) -> None:
    for key in KEYS:
        got, exp = np.asarray(out[key]), want[key]
        assert (got.dtype, got.shape) == (exp.dtype, exp.shape), (key, got.shape, exp.shape)
        bad = got != exp
        assert not bad.any(), f"{key}: {bad.mean():.4%} of values differ"


def test_builtin_is_the_hub_config(gemma):
    cfg = gemma.config
    assert (cfg.patch_size, cfg.merge_size, cfg.max_soft_tokens) == (16, 3, 280)
    assert (cfg.resample, cfg.do_normalize, cfg.backend) == (3, False, "pil")
    assert cfg.rescale_factor == HUB_GEMMA4["rescale_factor"]


def test_real_image(real_image_name, real_images, gemma, ref):
    check(gemma(real_images.open(real_image_name)),
          reference(ref, real_images.open(real_image_name)))


def test_pil_mode(mode_kind, real_images, gemma, ref):
    check(gemma(real_images.mode_image(mode_kind)),
          reference(ref, real_images.mode_image(mode_kind)))


def test_encoded_inputs(real_images, exif_rotated_jpeg, gemma, ref):
    """Bytes and paths (EXIF-rotated, 16-bit PNG too) load as transformers' load_image does."""
    for _, ours, theirs in encoded_cases(real_images, exif_rotated_jpeg):
        check(gemma(ours), reference(ref, theirs))


# tiny, odd, 1080p, 4K, extreme aspect both ways (a side floored to 0), already at the budget
# size (no resize), and sizes whose budget side is exactly a multiple of 48
SIZES = [(1, 1), (2, 3), (37, 53), (1920, 1080), (3840, 2160), (1, 500), (3000, 2), (4000, 25),
         (25, 4000), (48, 48), (816, 768), (768, 816), (1056, 576), (480, 480), (100, 49)]


def test_arrays(real_images, gemma, ref):
    for _, arr, kw in array_cases(real_images, SIZES):
        check(gemma(arr, **kw), reference(ref, arr, **kw))


def test_batch_torch_output_and_tokens(real_images, gemma, ref):
    def batch():
        return [real_images.open(n) for n in ("chelsea", "rocket", "camera", "logo2", "chelsea")]

    want = reference(ref, batch())
    check(gemma(batch()), want)
    out = gemma(batch(), return_tensors="pt")
    assert np.array_equal(out["pixel_values"].numpy(), want["pixel_values"])
    assert np.array_equal(out["image_position_ids"].numpy(), want["image_position_ids"])
    assert out["num_soft_tokens_per_image"].tolist() == want["num_soft_tokens_per_image"].tolist()
    assert out["num_tokens"].tolist() == want["num_soft_tokens_per_image"].tolist()
    for im, tokens in zip(batch(), want["num_soft_tokens_per_image"], strict=True):
        assert gemma.num_tokens(*im.size) == tokens  # the prompt's tokens, from the size alone


@pytest.mark.parametrize("kw", [{"max_soft_tokens": 70}, {"max_soft_tokens": 1120},
                                {"do_normalize": True, "image_mean": [0.5] * 3,
                                 "image_std": [0.5] * 3},
                                {"resample": 2}, {"patch_size": 14},
                                {"pooling_kernel_size": 2}], ids=str)
def test_call_options(kw, real_images, gemma, ref):
    im = real_images.open("coffee")
    check(gemma(im, **kw), reference(ref, im, **kw))


def test_unrescaled_bytes(real_images, gemma, ref):
    """do_rescale=False: transformers returns the resized bytes, as dtype="uint8" does."""
    im = real_images.open("coffee")
    check(gemma(im, do_rescale=False, dtype="uint8"), reference(ref, im, do_rescale=False))


def test_bfloat16_and_impossible_sizes(real_images, gemma, ref):
    import torch

    im = real_images.open("rocket")
    want = torch.from_numpy(reference(ref, im)["pixel_values"]).to(torch.bfloat16)
    got = gemma(im, dtype="bfloat16", return_tensors="pt")["pixel_values"]
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    strip = np.zeros((1, 20000, 3), np.uint8)  # the short side floors to 0: one 48 step
    strip[0, ::7] = 255
    cl = {"input_data_format": "channels_last"}
    check(gemma(strip, **cl), reference(ref, strip, **cl))
    with pytest.raises(InvalidImageError):
        gemma(np.zeros((0, 5, 3), np.uint8))


def model_folder(path, pre: dict, model_type: str):
    """path as a model folder: config.json naming model_type, pre as preprocessor_config.json."""
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    return path


def test_model_folder_and_dropin(tmp_path, real_images, ref):
    import smg_fast.hf as hf

    folder = model_folder(tmp_path, HUB_FILE, "gemma4")
    # the torchvision class it names is what transformers' Auto classes resolve (when installed)
    assert [load_processor(folder, **kw).config.backend for kw in ({}, {"backend": "pil"})] == [
        "torchvision", "pil"]
    proc = load_processor(folder, backend="pil")
    assert (proc.config.family, proc.config.max_soft_tokens) == ("gemma4", 280)

    def images():
        return [real_images.open("grace_hopper"), real_images.open("camera")]

    check(proc(images()), reference(ref, images()))
    ours = hf.Gemma4ImageProcessorPil.from_pretrained(tmp_path)
    theirs = Gemma4ImageProcessorPil.from_pretrained(tmp_path)
    assert ours.model_input_names == theirs.model_input_names
    for key in ("patch_size", "max_soft_tokens", "pooling_kernel_size", "do_normalize",
                "resample", "rescale_factor"):
        assert getattr(ours, key) == getattr(theirs, key), key
    assert list(ours.image_mean) == list(theirs.image_mean)
    out = ours(images(), return_tensors="np")
    assert set(out) == set(KEYS)
    check(out, reference(theirs, images()))
    check(ours(images(), return_tensors="np", max_soft_tokens=140),
          reference(theirs, images(), max_soft_tokens=140))
    bare, theirs_bare = ours(images()), theirs(images())  # no tensor type: as the class leaves it
    assert bare["num_soft_tokens_per_image"] == theirs_bare["num_soft_tokens_per_image"]
    assert isinstance(bare["num_soft_tokens_per_image"], list)
    assert np.array_equal(bare["pixel_values"], theirs_bare["pixel_values"])
    assert ours._reference is None  # transformers' class was never needed


def test_folder_without_model_type(tmp_path, real_images):
    """Known by its image_processor_type alone; what it lacks takes the class's defaults."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Gemma4ImageProcessorPil", "max_soft_tokens": 560}))
    proc = load_processor(tmp_path)
    assert (proc.config.family, proc.config.backend, proc.config.max_soft_tokens) == (
        "gemma4", "pil", 560)
    theirs = Gemma4ImageProcessorPil.from_pretrained(tmp_path)
    im = real_images.open("coffee")
    check(proc(im), reference(theirs, im))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Gemma4ImageProcessorPil", "max_soft_tokens": 300}))
    with pytest.raises(ValueError, match="max_soft_tokens"):
        load_processor(tmp_path)


def test_pil_dropins_return_the_bytes_as_transformers(real_images):
    """do_rescale=False, do_normalize=False: the Gemmas' PIL classes return the resized uint8."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    import smg_fast.hf as hf

    raw = {"do_rescale": False, "do_normalize": False}
    for ours, theirs in ((hf.Gemma4ImageProcessorPil(), Gemma4ImageProcessorPil()),
                         (hf.SiglipImageProcessorPil(), SiglipImageProcessorPil()),
                         (hf.Gemma3ImageProcessorPil(), Gemma3ImageProcessorPil())):
        got = ours(real_images.open("rocket"), return_tensors="np", **raw)["pixel_values"]
        want = theirs(real_images.open("rocket"), return_tensors="np", **raw)["pixel_values"]
        assert got.dtype == want.dtype == np.uint8 and np.array_equal(got, want), type(ours)


@pytest.mark.parametrize("family", ["gemma4", "gemma3n", "gemma3"])
def test_cli_check_compares_with_transformers(family, capsys):
    """python -m smg_fast --check on the Gemmas, whose outputs hold no image_grid_thw."""
    from smg_fast.__main__ import main

    assert main(["--model", family, "--check"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("bit-exact with transformers")


def test_nested_processor_config_is_read_first(tmp_path, real_images):
    """processor_config.json's image_processor wins over preprocessor_config.json, as there."""
    from transformers import AutoImageProcessor

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma4"}))
    nested = {**HUB_FILE, "image_processor_type": "Gemma4ImageProcessorPil",
              "max_soft_tokens": 560}
    (tmp_path / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Gemma4Processor", "image_processor": nested}))
    proc = load_processor(tmp_path)  # the nested file alone: the v5 save format
    theirs = AutoImageProcessor.from_pretrained(tmp_path)
    assert type(theirs).__name__ == "Gemma4ImageProcessorPil"
    assert (proc.config.backend, proc.config.max_soft_tokens) == ("pil", theirs.max_soft_tokens)
    im = real_images.open("coffee")
    check(proc(im), reference(theirs, im))

    # a stale legacy file beside it is not read (transformers' priority)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {**HUB_FILE, "image_processor_type": "Gemma4ImageProcessor", "max_soft_tokens": 140}))
    proc = load_processor(tmp_path)
    theirs = AutoImageProcessor.from_pretrained(tmp_path)
    assert (proc.config.backend, proc.config.max_soft_tokens) == ("pil", 560)
    assert theirs.max_soft_tokens == 560
    check(proc(im), reference(theirs, im))

    # a processor_config.json without image_processor: the legacy file is read
    (tmp_path / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Gemma4Processor"}))
    proc = load_processor(tmp_path)
    theirs = AutoImageProcessor.from_pretrained(tmp_path, backend="pil")
    assert proc.config.max_soft_tokens == theirs.max_soft_tokens == 140
    (tmp_path / "preprocessor_config.json").unlink()
    with pytest.raises(ValueError, match="image_processor object in processor_config.json"):
        load_processor(tmp_path)
    (tmp_path / "processor_config.json").write_text(json.dumps({"image_processor": [1]}))
    with pytest.raises(ValueError, match="not a JSON object"):
        load_processor(tmp_path)
