"""Bit-exact parity of the InternVL processor with transformers' GotOcr2ImageProcessorPil.

The OpenGVLab/InternVL3-1B-hf preprocessor_config.json values (smg_fast.testing.oracles'
HUB_INTERNVL, written out apart from the family module): 448x448 tiles, crop_to_patches, 1..12
tiles, BICUBIC, rescale 1/255, ImageNet mean / std. pixel_values (tiles, 3, 448, 448) float32
and num_patches are compared with np.array_equal on real photos, every PIL mode, encoded bytes
and paths, an EXIF-rotated JPEG, a 16-bit PNG, arrays and edge sizes (tiny, extreme aspect, the
aspect-ratio ties); through load_processor (by name and from a model folder) and the drop-in."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from support import counted_parity as cp
from transformers.models.got_ocr2 import image_processing_pil_got_ocr2 as got
from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError
from smg_fast.processors.tiles import candidates, closest_grid
from smg_fast.testing.oracles import HUB_INTERNVL, hf_internvl

# OpenGVLab/InternVL3-1B-hf's preprocessor_config.json, as a model folder has it.
HUB_FILE = {
    "crop_size": None, "crop_to_patches": True, "data_format": "channels_first",
    "default_to_square": True, "device": None, "do_center_crop": None, "do_convert_rgb": True,
    "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406], "image_processor_type": "GotOcr2ImageProcessorFast",
    "image_std": [0.229, 0.224, 0.225], "input_data_format": None, "max_patches": 12,
    "min_patches": 1, "processor_class": "InternVLProcessor", "resample": 3,
    "rescale_factor": 0.00392156862745098, "return_tensors": None,
    "size": {"height": 448, "width": 448},
}


COUNTED = cp.Counted("num_patches")
reference, check = COUNTED.reference, COUNTED.check
REF = hf_internvl(GotOcr2ImageProcessorPil)  # transformers' class as the hub config makes it


@pytest.fixture(scope="module")
def internvl():
    return load_processor("internvl")


def test_builtin_is_the_hub_config(internvl):
    cfg = internvl.config
    assert (cfg.patch_size, cfg.resample, cfg.backend) == (448, 3, "pil")
    assert (cfg.crop_to_patches, cfg.min_patches, cfg.max_patches) == (True, 1, 12)
    assert list(cfg.image_mean) == HUB_INTERNVL["image_mean"]
    assert list(cfg.image_std) == HUB_INTERNVL["image_std"]


@pytest.mark.parametrize("bounds", [(1, 12), (1, 6), (2, 9), (1, 40), (5, 3), (1, 1), (0, 12)],
                         ids=str)
def test_grid_rule_is_transformers(bounds):
    """The candidate order and the tie rule, against transformers' own functions."""
    lo, hi = bounds
    assert list(candidates(lo, hi)) == got.get_all_supported_aspect_ratios(lo, hi)
    sizes = [(w, h) for w in (1, 2, 3, 100, 448, 449, 895, 896, 1344, 1920, 4000)
             for h in (1, 2, 3, 100, 448, 672, 896, 1080, 3000)]
    for w, h in sizes:
        assert closest_grid(w, h, 448, 448, candidates(lo, hi)) == got.get_optimal_tiled_canvas(
            (h, w), (448, 448), lo, hi), (w, h)


@pytest.mark.parametrize("name", cp.CORPUS)
def test_corpus(name, real_images, exif_rotated_jpeg, internvl):
    """Real photos, PIL modes, bytes and paths, EXIF-rotated JPEGs, a 16-bit PNG, arrays."""
    ours, theirs = cp.corpus_input(real_images, exif_rotated_jpeg, name)
    check(internvl(ours), reference(REF, theirs))


# tiny, the tie sizes (square: 1, 4 or 9 tiles; 2:1), one tile's side, 1080p, 4K, extreme aspects
SIZES = [(1, 1), (2, 3), (37, 53), (448, 448), (449, 447), (896, 448), (1344, 1344), (200, 200),
         (1920, 1080), (3840, 2160), (1, 500), (3000, 2), (4000, 25), (13, 1100)]


@pytest.mark.parametrize("size", SIZES, ids=str)
def test_edge_sizes_from_arrays(size, real_images, internvl):
    w, h = size
    arr = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BICUBIC))
    check(internvl(arr, input_data_format="channels_last"),
          reference(REF, arr, input_data_format="channels_last"))


def test_batch_bfloat16_and_torch_output(real_images, internvl):
    """Images of several tile counts in one call; torch tensors; bfloat16 as the rounded value."""
    import torch

    images = [real_images.open(n) for n in ("chelsea", "rocket", "camera", "logo2", "retina")]
    pv, tiles = reference(REF, images)
    check(internvl(images), (pv, tiles))
    pt = internvl(images, return_tensors="pt")
    assert str(pt["num_patches"].dtype) == "torch.int64"
    assert pt["num_patches"].tolist() == tiles.tolist() and tiles.tolist()[-1] == 10
    assert pt["num_tokens"].tolist() == [256 * n for n in tiles.tolist()]
    assert torch.equal(pt["pixel_values"], torch.from_numpy(pv))
    bf = internvl(images, dtype="bfloat16")["pixel_values"]
    assert np.array_equal(bf, torch.from_numpy(pv).to(torch.bfloat16).view(torch.uint16))


def test_tokens_without_pixels(internvl):
    """256 tokens per tile (InternVLProcessor's image_seq_length), tiles as transformers counts."""
    for w, h in [(1920, 1080), (1, 1), (448, 448), (1344, 1344), (4000, 25)]:
        assert internvl.num_tokens(w, h) == 256 * REF.get_number_of_image_patches(h, w)


@pytest.mark.parametrize("kw", [{"crop_to_patches": False}, {"max_patches": 6},
                                {"min_patches": 3, "max_patches": 8}, {"max_patches": 1},
                                {"size": {"height": 224, "width": 224}},
                                {"image_mean": [0.1, 0.2, 0.3]}, {"do_normalize": False},
                                {"do_rescale": False, "do_normalize": False}, {"resample": 2}],
                         ids=str)
def test_call_options(kw, real_images, internvl):
    """Tiling, size, mean / std, the rescale flags and resample as transformers reads them."""
    im = real_images.open("coffee")
    check(internvl(im, **kw), reference(REF, im, **kw))


def test_non_square_tiles_are_refused(real_images, internvl):
    with pytest.raises(UnsupportedCallError, match="square"):
        internvl(real_images.open("rocket"), size={"height": 448, "width": 224})


def test_model_folder(tmp_path, real_images):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "internvl"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    # it names the torchvision class, which transformers' Auto classes resolve (when installed)
    assert load_processor(tmp_path).config.backend == "torchvision"
    proc = load_processor(tmp_path, backend="pil")
    assert proc.config.family == "internvl" and proc.config.max_patches == 12
    check(proc(real_images.open("grace_hopper")), reference(REF, real_images.open("grace_hopper")))


def test_folder_without_model_type_and_class_defaults(tmp_path, real_images):
    """Known by its image_processor_type; what it lacks takes the class's defaults (384, CLIP)."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "GotOcr2ImageProcessorPil"}))
    proc = load_processor(tmp_path)
    cfg = proc.config
    assert (cfg.family, cfg.backend, cfg.patch_size, cfg.crop_to_patches) == (
        "internvl", "pil", 384, False)
    theirs = GotOcr2ImageProcessorPil.from_pretrained(tmp_path)
    im = real_images.open("coffee")
    check(proc(im), reference(theirs, im))
    check(proc(im, crop_to_patches=True), reference(theirs, im, crop_to_patches=True))


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="max_patches"):
        load_processor("internvl", max_patches=100000)


def test_dropin_equals_transformers(tmp_path, real_images):
    import smg_fast.hf as hf

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    ours = hf.GotOcr2ImageProcessorPil.from_pretrained(tmp_path)
    theirs = GotOcr2ImageProcessorPil.from_pretrained(tmp_path)
    assert ours.model_input_names == ["pixel_values", "num_patches"]
    for key in ("crop_to_patches", "min_patches", "max_patches"):
        assert getattr(ours, key) == getattr(theirs, key)
    assert ours.size == {"height": 448, "width": 448}
    images = [real_images.open("rocket"), real_images.open("camera"), real_images.open("retina")]
    out = ours(images, return_tensors="np")
    assert set(out) == {"pixel_values", "num_patches"}
    check(out, reference(REF, images))
    check(ours(images, return_tensors="np", max_patches=4), reference(REF, images, max_patches=4))
    for h, w in [(1080, 1920), (1, 1), (25, 4000), (1344, 1344)]:
        for kw in ({}, {"max_patches": 6}, {"crop_to_patches": False}):
            assert ours.get_number_of_image_patches(h, w, kw) == \
                theirs.get_number_of_image_patches(h, w, kw)
    # no return_tensors: a list of one array per tile and int counts, as transformers' class
    untyped, want = ours(images), theirs(images)
    assert type(untyped["pixel_values"]) is list and untyped["num_patches"] == want["num_patches"]
    assert all(np.array_equal(a, b) for a, b in zip(untyped["pixel_values"],
                                                    want["pixel_values"], strict=True))
    assert ours._reference is None  # transformers' class was never needed
