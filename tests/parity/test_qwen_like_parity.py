"""Bit-exact parity of PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR with transformers' PIL classes.

PaddleOCRVLImageProcessorPil, Ernie4_5_VLMoeImageProcessorPil and HunYuanVLImageProcessorPil
configured from each family's hub preprocessor_config.json (smg_fast.testing.oracles:
PaddleOCR-VL's published values; ERNIE-4.5-VL's and HunyuanOCR's as transformers' classes
default to them, with HunyuanOCR's hub resample LANCZOS): np.array_equal on float32
pixel_values, equal image_grid_thw (int64) and token counts, on real photos, every PIL mode,
encoded bytes, EXIF-rotated paths, 16-bit PNGs, arrays and edge sizes, through load_processor by
name and from a model folder. The torchvision classes: test_qwen_like_tv_parity.py."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from PIL import Image
from support.hf_oracle import hf_call
from support.images import encode
from transformers.image_utils import load_image

import smg_fast
from smg_fast.errors import InvalidImageError
from smg_fast.testing.oracles import HUB_QWEN_LIKE, qwen_like_reference, qwen_like_tokens

FAMILIES = tuple(HUB_QWEN_LIKE)
# Each class's patch rows: PaddleOCR-VL's [N, 3, 14, 14], the others' [N, 3 * P * P].
ROW_SHAPES = {"paddleocr_vl": (3, 14, 14), "ernie4_5_vl_moe": (3 * 14 * 14,),
              "hunyuan_vl": (3 * 16 * 16,)}
# tiny, odd, thin (PaddleOCR-VL scales a side under 28 up first), 1080p, extreme aspects
SIZES = ((1, 1), (37, 53), (5, 300), (300, 5), (2, 390), (27, 27), (13, 1100), (1920, 1080),
         (4000, 25), (1, 200), (200, 1))


@pytest.fixture(params=FAMILIES)
def fam(request) -> str:
    return request.param


def hf_pil(family: str, **overrides):
    """transformers' PIL class of family, configured from its hub config."""
    return qwen_like_reference(family, "pil", **overrides)


def check(out, ref_pv, ref_grid, family: str) -> None:
    """Our outputs equal the reference's, shaped as its class shapes them."""
    grid = np.asarray(out["image_grid_thw"])
    assert grid.dtype == np.int64 and np.asarray(ref_grid).dtype == np.int64
    assert grid.tolist() == np.asarray(ref_grid).tolist()
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32 and pv.shape[1:] == ROW_SHAPES[family]
    assert pv.shape == np.asarray(ref_pv).shape and np.array_equal(pv, ref_pv)
    tokens = np.asarray(out["num_tokens"]).reshape(-1).tolist()
    assert tokens == [qwen_like_tokens(family, row) for row in grid.tolist()]


def ours(family: str, **overrides):
    return smg_fast.load_processor(family, backend="pil", **overrides)


def test_real_image(fam, real_image_name, real_images):
    ref_pv, ref_grid = hf_call(hf_pil(fam), real_images.open(real_image_name))
    check(ours(fam)(real_images.open(real_image_name)), ref_pv, ref_grid, fam)


def test_pil_mode(fam, mode_kind, real_images):
    ref_pv, ref_grid = hf_call(hf_pil(fam), real_images.mode_image(mode_kind))
    check(ours(fam)(real_images.mode_image(mode_kind)), ref_pv, ref_grid, fam)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_edge_sizes(fam, size, real_images):
    image = real_images.rgb("astronaut").resize(size, Image.Resampling.BILINEAR)
    ref_pv, ref_grid = hf_call(hf_pil(fam), image)
    check(ours(fam)(image), ref_pv, ref_grid, fam)


@pytest.mark.parametrize("size", [(1, 201), (3000, 14), (2, 500)])
def test_aspect_past_200_is_refused_as_transformers_refuses_it(fam, size):
    image = Image.new("RGB", size, (10, 20, 30))
    with pytest.raises(ValueError, match="aspect ratio"):
        hf_pil(fam)(image, return_tensors="np")
    with pytest.raises(InvalidImageError, match="aspect ratio"):
        ours(fam)(image)


def test_paddle_checks_the_aspect_of_the_upscaled_sides():
    """1 x 201 upscales to 28 x 5628 (ratio 201) and 27 x 5427 to 28 x 5628: both refused."""
    for size in ((201, 1), (5427, 27)):
        with pytest.raises(InvalidImageError):
            ours("paddleocr_vl")(Image.new("RGB", size))
    # 27 x 5400 upscales to 28 x 5600: ratio 200 exactly, computed as transformers does
    image = Image.new("RGB", (27, 5400), (200, 100, 50))
    ref_pv, ref_grid = hf_call(hf_pil("paddleocr_vl"), image)
    check(ours("paddleocr_vl")(image), ref_pv, ref_grid, "paddleocr_vl")


@pytest.mark.parametrize("name", ["rocket", "chelsea", "camera", "logo2"])
def test_encoded_bytes(fam, name, real_images):
    data = real_images.bytes(name)
    ref_pv, ref_grid = hf_call(hf_pil(fam), load_image(base64.b64encode(data).decode("ascii")))
    check(ours(fam)(data), ref_pv, ref_grid, fam)


def test_sixteen_bit_png(fam, real_images):
    data = encode(real_images.mode_image("I;16"), "PNG")
    ref_pv, ref_grid = hf_call(hf_pil(fam), load_image(base64.b64encode(data).decode("ascii")))
    check(ours(fam)(data), ref_pv, ref_grid, fam)


def test_exif_rotated_path(fam, exif_rotated_jpeg):
    ref_pv, ref_grid = hf_call(hf_pil(fam), load_image(str(exif_rotated_jpeg)))
    out = ours(fam)(str(exif_rotated_jpeg))
    check(out, ref_pv, ref_grid, fam)
    assert out["image_grid_thw"].tolist() == [list(ours(fam).grid(427, 640))]


def test_arrays_and_a_batch(fam, real_images):
    """HWC uint8, CHW uint8 and a grey (H, W, 1) array, then a batch of mixed sizes."""
    rgb = real_images.rgb_array("coffee")
    grey = np.asarray(real_images.open("camera"))[:, :, None].copy()
    for arr in (rgb, np.ascontiguousarray(rgb.transpose(2, 0, 1)), grey):
        ref_pv, ref_grid = hf_call(hf_pil(fam), arr)
        check(ours(fam)(arr), ref_pv, ref_grid, fam)
    batch = [real_images.open("chelsea"), real_images.open("rocket"), real_images.open("logo")]
    ref_pv, ref_grid = hf_call(hf_pil(fam), batch)
    check(ours(fam)(batch), ref_pv, ref_grid, fam)


def test_call_size_option(fam, real_images):
    """size={"shortest_edge", "longest_edge"} at call time, as transformers reads it."""
    size = {"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 64}
    image = real_images.open("hubble")
    ref_pv, ref_grid = hf_call(hf_pil(fam), image, size=size)
    check(ours(fam)(image, size=size), ref_pv, ref_grid, fam)


@pytest.mark.parametrize("family", ["paddleocr_vl", "hunyuan_vl"])
def test_min_max_pixels_options(family, real_images):
    """PaddleOCR-VL's and HunyuanOCR's classes still read min_pixels / max_pixels."""
    image = real_images.open("grace_hopper")
    kw = dict(min_pixels=32 * 32 * 16, max_pixels=32 * 32 * 100)
    ref_pv, ref_grid = hf_call(hf_pil(family), image, **kw)
    check(ours(family)(image, **kw), ref_pv, ref_grid, family)
    assert ref_grid.tolist() != ours(family)(image)["image_grid_thw"].tolist()  # they count


def test_hunyuan_resizes_bicubic_whatever_resample_says(real_images):
    """The hub config's LANCZOS (and a call's resample) is not used by transformers' classes."""
    image = real_images.open("coffee")
    ref_pv, ref_grid = hf_call(hf_pil("hunyuan_vl"), image, resample=2)
    proc = ours("hunyuan_vl")
    check(proc(image, resample=1), ref_pv, ref_grid, "hunyuan_vl")
    assert proc.config.resample == 3
    with pytest.raises(ValueError, match="resizes BICUBIC"):
        ours("hunyuan_vl", resample=1)


# Each family's hub preprocessor_config.json as published (HunyuanOCR's and ERNIE-4.5-VL's
# with the class defaults' numbers), and its config.json model_type.
FOLDERS = {
    "paddleocr_vl": {"image_processor_type": "PaddleOCRVLImageProcessor", "min_pixels": 147384,
                     "max_pixels": 2822400, "patch_size": 14, "merge_size": 2,
                     "temporal_patch_size": 1, "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
                     "resample": 3, "rescale_factor": 0.00392156862745098, "do_resize": True,
                     "do_rescale": True, "do_normalize": True, "do_convert_rgb": True},
    "ernie4_5_vl_moe": {"image_processor_type": "Ernie4_5_VLMoeImageProcessor",
                        "size": {"shortest_edge": 3136, "longest_edge": 4842768},
                        "patch_size": 14, "merge_size": 2, "temporal_patch_size": 1,
                        "image_mean": [0.48145466, 0.4578275, 0.40821073],
                        "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3},
    "hunyuan_vl": {"image_processor_type": "HunYuanVLImageProcessor", "min_pixels": 262144,
                   "max_pixels": 4194304, "patch_size": 16, "merge_size": 2,
                   "temporal_patch_size": 1, "image_mean": [0.48145466, 0.4578275, 0.40821073],
                   "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 1},
}


def model_folder(tmp_path, family: str, pil: bool = True):
    tmp_path.mkdir(parents=True, exist_ok=True)
    pre = dict(FOLDERS[family])
    if pil:
        pre["image_processor_type"] += "Pil"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": family}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    return tmp_path


def test_model_folder(fam, tmp_path, real_images):
    proc = smg_fast.load_processor(model_folder(tmp_path, fam))
    assert proc.config.family == fam and proc.config.backend == "pil"
    assert proc.config == ours(fam).config
    tv = smg_fast.load_processor(model_folder(tmp_path / "tv", fam, pil=False))
    assert tv.config.backend == "torchvision"
    ref_pv, ref_grid = hf_call(hf_pil(fam), real_images.open("retina"))
    check(proc(real_images.open("retina")), ref_pv, ref_grid, fam)


def test_folder_without_model_type_is_recognized(fam, tmp_path):
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(FOLDERS[fam]))
    assert smg_fast.load_processor(tmp_path).config.family == fam


def test_ernie_refuses_min_max_pixels_options(real_images):
    """ERNIE's classes take no min_pixels / max_pixels call options (only size): refused."""
    from smg_fast.errors import UnsupportedCallError

    with pytest.raises(UnsupportedCallError, match="min_pixels"):
        ours("ernie4_5_vl_moe")(real_images.open("chelsea"), min_pixels=100_000)
