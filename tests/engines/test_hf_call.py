"""The transformers call signature in the main environment, against transformers' PIL backend.

Qwen2VLImageProcessorPil, the real class, compared with np.array_equal: every input kind, nested
lists, call-time options; options smg-fast cannot honour raise errors naming them; smg_fast.hf's
from_pretrained and its BatchFeature. (The torchvision classes and the processor flow:
tests/engines/test_hf_classes.py, in the oracle venv.)
"""

from __future__ import annotations

import base64
import io
import json
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import BatchFeature

import smg_fast
from smg_fast.hf import Qwen2VLImageProcessor
from smg_fast.hf import Qwen2VLImageProcessorPil as SmgPil


@pytest.fixture(scope="module")
def qwen2(ours):
    """smg_fast's Qwen2-VL processor."""
    return ours("qwen2_vl")


@pytest.fixture(scope="module")
def rgb(real_images):
    return np.asarray(real_images.rgb("chelsea"))[:233, :301]


def _png_b64(arr: np.ndarray) -> str:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def kinds(rgb: np.ndarray) -> dict:
    gray = rgb[:, :, 0]
    f = rgb.astype(np.float32) / 255
    return {
        "numpy_hwc": rgb, "numpy_chw": np.ascontiguousarray(rgb.transpose(2, 0, 1)),
        "numpy_chw_view": rgb.transpose(2, 0, 1), "numpy_hw1": gray[:, :, None],
        "numpy_1hw": gray[None], "numpy_rgba": np.dstack([rgb, gray]),
        "numpy_rgba_chw": np.dstack([rgb, gray]).transpose(2, 0, 1),
        "torch_hwc": torch.from_numpy(rgb.copy()),
        "torch_chw": torch.from_numpy(rgb.copy()).permute(2, 0, 1),
        "int16": rgb.astype(np.int16), "float_integral": rgb.astype(np.float64),
        "torch_float_integral_chw": torch.from_numpy(rgb.astype(np.float32)).permute(2, 0, 1),
        "nested": [[rgb], [rgb[:120, :200], rgb[:64]]], "nested_empty": [[rgb], []],
        "batch_4d": np.stack([rgb, rgb[::-1]]), "list_4d": [np.stack([rgb, rgb]), rgb[None]],
        "pil_list": [Image.fromarray(rgb), Image.fromarray(gray)],
        "float_unit_gray": f[:, :, :1],
        "base64": _png_b64(rgb), "data_url": "data:image/png;base64," + _png_b64(rgb),
    }


KINDS = list(kinds(np.zeros((40, 40, 3), np.uint8)))


@pytest.mark.parametrize("kind", KINDS)
def test_input_kind_equals_transformers(kind, rgb, hf_qwen2, qwen2):
    img = kinds(rgb)[kind]
    kw = {"do_rescale": False} if kind == "float_unit_gray" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = hf_qwen2(img, return_tensors="np", **kw)
    got = qwen2(img, **kw)
    assert np.array_equal(got["pixel_values"], ref["pixel_values"]), kind
    assert np.array_equal(got["image_grid_thw"], ref["image_grid_thw"]), kind


def test_float_unit_in_a_batch_with_uint8(rgb, hf_qwen2, qwen2):
    # each image's own scale: u8 with do_rescale=False is unscaled, [0, 1] floats are /255
    imgs = [rgb, rgb.astype(np.float32) / 255, rgb[:50]]
    ref = hf_qwen2(imgs, return_tensors="np", do_rescale=False)
    assert np.array_equal(qwen2(imgs, do_rescale=False)["pixel_values"], ref["pixel_values"])


OPTIONS = [
    {"size": {"shortest_edge": 3136, "longest_edge": 30000}},
    {"min_pixels": 40000, "max_pixels": 90000},
    {"patch_size": 16, "merge_size": 1}, {"temporal_patch_size": 1},
    {"image_mean": [0.2, 0.3, 0.4], "image_std": [0.5, 0.6, 0.7]}, {"image_mean": 0.5},
    {"do_normalize": False}, {"do_rescale": False}, {"rescale_factor": 1 / 127.5},
    {"do_rescale": False, "do_normalize": False}, {"resample": 2},
    {"input_data_format": "channels_last", "do_convert_rgb": True},
    {"disable_grouping": True, "data_format": "channels_first"},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o))
def test_call_option_equals_transformers(options, rgb, hf_qwen2, qwen2):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # min_pixels / max_pixels at call time: deprecated there
        ref = hf_qwen2(rgb, return_tensors="np", **options)
    got = qwen2(rgb, **options)
    assert np.array_equal(got["pixel_values"], ref["pixel_values"])
    assert np.array_equal(got["image_grid_thw"], ref["image_grid_thw"])


def test_ambiguous_channel_axis(hf_qwen2, qwen2):
    img = np.random.default_rng(1).integers(0, 256, (3, 64, 4), dtype=np.uint8)  # 3 / 4 ends
    first = hf_qwen2(img, return_tensors="np", size={"shortest_edge": 1, "longest_edge": 10**6})
    last = hf_qwen2(img, return_tensors="np", size={"shortest_edge": 1, "longest_edge": 10**6},
              input_data_format="channels_last")
    assert not np.array_equal(first["pixel_values"], last["pixel_values"])
    size = {"size": {"shortest_edge": 1, "longest_edge": 10**6}}
    # smg-fast's own call keeps HWC (as before); transformers' guess (channels first) on request
    assert np.array_equal(qwen2(img, **size)["pixel_values"], last["pixel_values"])
    got = qwen2(img, channels_first_wins=True, **size)["pixel_values"]
    assert np.array_equal(got, first["pixel_values"])
    got = qwen2(img, input_data_format="channels_first", **size)["pixel_values"]
    assert np.array_equal(got, first["pixel_values"])
    assert np.array_equal(SmgPil()(img, return_tensors="np", **size)["pixel_values"],
                          first["pixel_values"])


def test_do_convert_rgb_false_on_rgb_keeps_the_colour_key(hf_qwen2, qwen2):
    img = Image.fromarray(np.full((60, 60, 3), 7, np.uint8))
    img.info["transparency"] = (7, 7, 7)  # convert_to_rgb would paint it white
    ref = hf_qwen2(img, return_tensors="np", do_convert_rgb=False)
    assert np.array_equal(qwen2(img, do_convert_rgb=False)["pixel_values"], ref["pixel_values"])
    assert not np.array_equal(qwen2(img)["pixel_values"], ref["pixel_values"])


@pytest.mark.parametrize("options, match", [
    ({"bogus": 1}, r"bogus"), ({"do_resize": False}, "do_resize"),
    ({"do_center_crop": True}, "do_center_crop"), ({"device": "cuda"}, "device"),
    ({"size": {"height": 10, "width": 10}}, "size"),
    ({"input_data_format": "none"}, "input_data_format"),
    ({"min_pixels": 9000, "max_pixels": 100}, "min_pixels"),
])
def test_unhonourable_options_name_themselves(options, match, rgb, qwen2):
    with pytest.raises((TypeError, ValueError), match=match):
        qwen2(rgb, **options)


def test_refusals_name_the_reason(rgb, qwen2):
    f = rgb.astype(np.float32) / 255
    with pytest.raises(ValueError, match="do_rescale=True with float images"):
        qwen2(f)  # transformers would divide by 255 twice (checked: values -1.79..-1.47)
    with pytest.raises(ValueError, match="do_convert_rgb=False with a L image"):
        qwen2(Image.fromarray(rgb[:, :, 0]), do_convert_rgb=False)
    with pytest.raises(ValueError, match="do_convert_rgb=False with a 4-channel"):
        qwen2(np.dstack([rgb, rgb[:, :, 0]]), do_convert_rgb=False)
    with pytest.raises(ValueError, match="backend='torchvision'"):
        smg_fast.load_processor("qwen2_vl", backend="torchvision")(f, do_rescale=False)
    with pytest.raises(smg_fast.InvalidImageError, match="outside \\[0, 1\\]"):
        qwen2(f * 2, do_rescale=False)
    with pytest.raises(smg_fast.InvalidImageError, match="not fetched"):
        qwen2("https://example.com/a.png")


def test_hf_class_from_pretrained_and_batch_feature(tmp_path, rgb, hf_qwen2):
    pre = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
           "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
           "image_mean": [0.48145466, 0.4578275, 0.40821073],
           "image_std": [0.26862954, 0.26130258, 0.27577711]}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    proc = SmgPil.from_pretrained(tmp_path)
    assert proc.backend == "pil" and proc.merge_size == 2 and proc.min_pixels == 3136
    assert Qwen2VLImageProcessor.from_pretrained(tmp_path).backend == "torchvision"
    for rt in ("pt", "np", None):
        out = proc([[rgb], [rgb[:70]]], return_tensors=rt)
        ref = hf_qwen2([[rgb], [rgb[:70]]], return_tensors=rt)
        assert isinstance(out, BatchFeature) and sorted(out.keys()) == sorted(ref.keys())
        for k in ref:
            assert type(out[k]) is type(ref[k]) and out[k].dtype == ref[k].dtype, (rt, k)
            assert np.array_equal(np.asarray(out[k]), np.asarray(ref[k])), (rt, k)
    assert (proc.get_number_of_image_patches(233, 301)
            == hf_qwen2.get_number_of_image_patches(233, 301))
    assert proc.get_number_of_image_patches(233, 301, {"max_pixels": 20000}) == \
        hf_qwen2.get_number_of_image_patches(233, 301, {"max_pixels": 20000})
    bf16 = proc(rgb, return_tensors="pt", dtype="bfloat16")["pixel_values"]
    assert bf16.dtype == torch.bfloat16
    assert torch.equal(bf16, torch.from_numpy(hf_qwen2(rgb, return_tensors="np")["pixel_values"])
                       .to(torch.bfloat16))


def test_array_ranks_accepted_and_refused_as_transformers_does(real_images, hf_qwen2):
    """2-D arrays are refused (ValueError) as transformers refuses them.

    One channel as (H, W, 1) or (1, H, W) is computed, equal to transformers'."""
    grey = np.asarray(real_images.open("camera").convert("L").resize((64, 48)))
    forms = {"2d": grey, "[2d]": [grey], "[[2d]]": [[grey]], "chw": grey[None],
             "[hwc]": [grey[:, :, None]], "[nchw]": [grey[None, None]]}
    for name, images in forms.items():
        try:
            ref = hf_qwen2(images, return_tensors="np")["pixel_values"]
        except ValueError:
            with pytest.raises(ValueError):
                SmgPil(size=dict(hf_qwen2.size))(images, return_tensors="np")
            continue
        ours = SmgPil(size=dict(hf_qwen2.size))(images, return_tensors="np")["pixel_values"]
        assert np.array_equal(ours, ref), name
