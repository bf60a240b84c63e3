"""smg_fast.hf's PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR classes against transformers' PIL ones.

The drop-ins under transformers' class names, from_pretrained on a model folder with each hub
preprocessor_config.json, every input kind of one call, BatchFeature types, call options, and
get_number_of_image_patches (an int, HunYuanVL's an (h, w) grid), each equal to transformers'
PIL class (np.array_equal); both backends' drop-ins against transformers' torchvision and PIL
classes in the oracle venv (tests/support/hf_qwen_like_script.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import BatchFeature

import smg_fast.hf as hf
from smg_fast.testing.oracles import HUB_QWEN_LIKE, QWEN_LIKE_CLASSES, qwen_like_reference

CLASSES = {f: name for f, (_, name) in QWEN_LIKE_CLASSES.items()}


@pytest.fixture(params=tuple(CLASSES))
def fam(request) -> str:
    return request.param


def transformers_pil(family: str):
    return qwen_like_reference(family, "pil")


def folder(tmp_path, family: str, cls: str):
    hub = HUB_QWEN_LIKE[family]
    pre = {"image_processor_type": cls, "size": {"shortest_edge": hub["min_pixels"],
                                                 "longest_edge": hub["max_pixels"]},
           "patch_size": hub["patch_size"], "merge_size": 2, "temporal_patch_size": 1,
           "image_mean": hub["mean"], "image_std": hub["std"], "resample": hub["resample"]}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": family}))
    return tmp_path


def test_from_pretrained_and_every_output(fam, tmp_path, real_images):
    name = CLASSES[fam]
    proc = getattr(hf, name + "Pil").from_pretrained(folder(tmp_path, fam, name + "Pil"))
    assert proc.backend == "pil" and proc.family == fam
    assert getattr(hf, name).from_pretrained(tmp_path).backend == "torchvision"
    ref = transformers_pil(fam)
    rgb = np.asarray(real_images.rgb("chelsea"))[:233, :301]
    images = [[rgb], [rgb[:70]], [Image.fromarray(rgb[:, :, 0])],
              [np.ascontiguousarray(rgb.transpose(2, 0, 1))]]
    for rt in ("pt", "np", None):
        out, want = proc(images, return_tensors=rt), ref(images, return_tensors=rt)
        assert isinstance(out, BatchFeature) and sorted(out.keys()) == sorted(want.keys())
        for k in want:
            assert type(out[k]) is type(want[k]) and out[k].dtype == want[k].dtype, (rt, k)
            assert out[k].shape == want[k].shape, (rt, k)
            assert np.array_equal(np.asarray(out[k]), np.asarray(want[k])), (rt, k)
    opts = dict(size={"shortest_edge": 1024, "longest_edge": 100_000}, do_normalize=False)
    assert np.array_equal(proc(rgb, return_tensors="np", **opts)["pixel_values"],
                          ref(rgb, return_tensors="np", **opts)["pixel_values"])
    bf16 = proc(rgb, return_tensors="pt", dtype="bfloat16")["pixel_values"]
    assert torch.equal(bf16, torch.from_numpy(ref(rgb, return_tensors="np")["pixel_values"])
                       .to(torch.bfloat16))


@pytest.mark.parametrize("size", [(233, 301), (20, 900), (4000, 3000), (5, 5)])
def test_get_number_of_image_patches(fam, size):
    ref, hub = transformers_pil(fam), HUB_QWEN_LIKE[fam]
    proc = getattr(hf, CLASSES[fam] + "Pil")(
        size={"shortest_edge": hub["min_pixels"], "longest_edge": hub["max_pixels"]},
        patch_size=hub["patch_size"], merge_size=2)
    for kw in (None, {"max_pixels": 60_000}, {"min_pixels": 500_000, "patch_size": 14}):
        got, want = (proc.get_number_of_image_patches(*size, kw),
                     ref.get_number_of_image_patches(*size, kw))
        assert got == want and type(got) is type(want), (kw, got, want)


def test_auto_image_processor_returns_the_drop_ins(tmp_path):
    from transformers import AutoImageProcessor

    registered = hf.register()
    for fam, name in CLASSES.items():
        assert fam in registered
        (tmp_path / fam).mkdir()
        proc = AutoImageProcessor.from_pretrained(folder(tmp_path / fam, fam, name + "Pil"))
        assert type(proc) is getattr(hf, name + "Pil") and proc.backend == "pil"



@pytest.fixture(scope="module")
def class_results(real_images, tmp_path_factory) -> dict:
    """{case: true | false | "error text"} from tests/support/hf_qwen_like_script.py (venv)."""
    from pathlib import Path

    from support.tv_oracle import run_with_smg_fast

    script = Path(__file__).parents[1] / "support" / "hf_qwen_like_script.py"
    return run_with_smg_fast(script, [str(real_images.path("chelsea"))],
                             tmp_path_factory.mktemp("smg_fast_only"))


def test_drop_ins_equal_transformers_in_the_oracle_venv(class_results):
    """Both backends' drop-ins, built bare and from the hub config, against transformers'."""
    assert len(class_results) == 3 * 2 * 2 * 8
    wrong = {k: v for k, v in class_results.items() if v is not True}
    assert not wrong, wrong


def test_constructor_keys_read_as_transformers_reads_them(fam, real_images):
    """Top-level min/max_pixels and the attributes transformers' processors read.

    ERNIE's classes ignore the pixel keys, the others read them; HunYuanVLProcessor reads its
    image processor's spatial_patch_size."""
    rgb = np.asarray(real_images.rgb("coffee"))
    ref_cls = type(transformers_pil(fam))
    kwargs = {"min_pixels": 100352, "max_pixels": 200704}
    ours = getattr(hf, CLASSES[fam] + "Pil")(**kwargs)
    ref = ref_cls(**kwargs)
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(ours(rgb, return_tensors="np")[key],
                              ref(rgb, return_tensors="np")[key]), key
    assert getattr(ours, "spatial_patch_size", None) == getattr(ref, "spatial_patch_size", None)
