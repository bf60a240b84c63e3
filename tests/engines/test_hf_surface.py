"""smg_fast.hf's classes where transformers' classes stand, in the main environment.

No torchvision there, so transformers resolves the PIL backend: register() and
AutoImageProcessor, transformers' loader arguments, repr / to_dict / save_pretrained / deepcopy
/ pickle, and calls handed to transformers' own class. Every output is compared with
transformers' Qwen2VLImageProcessorPil on real images. (The torchvision classes, AutoProcessor
and the uint8 patches: tests/engines/test_hf_engines.py, in the oracle venv.)
"""

from __future__ import annotations

import copy
import json
import logging
import pickle

import numpy as np
import pytest
from transformers import AutoImageProcessor
from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

import smg_fast.hf as sh

QWEN2_HUB = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
             "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
             "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711],
             "processor_class": "Qwen2VLProcessor"}


def write_folder(path, pre, model_type):
    path.mkdir(parents=True)
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture
def registered():
    """register() for one test, transformers' registry restored after it."""
    saved = dict(IMAGE_PROCESSOR_MAPPING._extra_content)
    yield sh.register()
    IMAGE_PROCESSOR_MAPPING._extra_content.clear()
    IMAGE_PROCESSOR_MAPPING._extra_content.update(saved)


@pytest.fixture(scope="module")
def photos(real_images):
    return [real_images.open(n) for n in ("chelsea", "rocket", "grace_hopper", "logo")]


def same(a, b) -> bool:
    return sorted(a.keys()) == sorted(b.keys()) and all(
        np.asarray(a[k]).dtype == np.asarray(b[k]).dtype
        and np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_register_makes_auto_return_ours(registered, tmp_path, photos):
    assert {"qwen2_vl", "qwen2_5_vl", "qwen3_vl"} <= set(registered)
    assert sh.register() == registered  # idempotent
    folder = write_folder(tmp_path / "q", QWEN2_HUB, "qwen2_5_vl")
    ours = AutoImageProcessor.from_pretrained(folder)
    assert type(ours) is sh.Qwen2VLImageProcessorPil  # transformers' pick without torchvision
    assert type(AutoImageProcessor.from_pretrained(folder, backend="torchvision")) is \
        sh.Qwen2VLImageProcessor
    ref = Qwen2VLImageProcessorPil.from_pretrained(folder)
    for rt in ("np", "pt"):
        assert same(ours(photos, return_tensors=rt), ref(photos, return_tensors=rt))
    assert ours.size == ref.size and ours.image_mean == ref.image_mean
    assert (ours.patch_size, ours.merge_size, ours.temporal_patch_size) == (14, 2, 2)


def test_other_families_keep_transformers_classes(registered, tmp_path):
    clip = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 224},
            "crop_size": {"height": 224, "width": 224}}
    folder = write_folder(tmp_path / "clip", clip, "clip")
    proc = AutoImageProcessor.from_pretrained(folder, backend="pil")
    assert type(proc).__module__.startswith("transformers.")


def test_from_pretrained_takes_what_loaders_pass(tmp_path, photos):
    write_folder(tmp_path / "repo" / "sub", {**QWEN2_HUB, "max_pixels": 200_000}, "qwen2_vl")
    kwargs = dict(_from_auto=True, revision="main", cache_dir=str(tmp_path / "cache"),
                  trust_remote_code=True, token=None, local_files_only=True, use_fast=True,
                  _from_pipeline=None, code_revision=None)
    ours = sh.Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "repo", subfolder="sub",
                                                       **kwargs)
    assert ours.max_pixels == 200_000 and ours.backend == "pil"
    ours2, unused = sh.Qwen2VLImageProcessorPil.from_pretrained(
        tmp_path / "repo" / "sub", min_pixels=12544, not_an_option=3, return_unused_kwargs=True)
    assert unused == {"not_an_option": 3} and ours2.min_pixels == 12544
    ref = Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "repo" / "sub", min_pixels=12544)
    assert same(ours2(photos, return_tensors="np"), ref(photos, return_tensors="np"))


def test_serialization_and_copies(tmp_path, photos):
    ours = sh.Qwen2VLImageProcessorPil(**QWEN2_HUB)
    ref = Qwen2VLImageProcessorPil(**QWEN2_HUB)
    text = repr(ours)
    assert text.startswith("Qwen2VLImageProcessorPil (smg-fast, backend='pil')")
    data = json.loads(ours.to_json_string())
    assert data["image_processor_type"] == "Qwen2VLImageProcessorPil"
    assert not any(k.startswith("_") for k in data)
    ours.save_pretrained(tmp_path / "saved")
    reloaded = Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "saved")  # transformers' own
    want = ref(photos, return_tensors="np")
    assert same(reloaded(photos, return_tensors="np"), want)
    for clone in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours)), copy.copy(ours)):
        assert type(clone) is type(ours) and clone.to_dict() == ours.to_dict()
        assert same(clone(photos, return_tensors="np"), want)


def test_keys_nothing_reads_are_kept_as_transformers_keeps_them(tmp_path):
    """Unknown preprocessor_config.json keys stay attributes and are saved; loader keys are not."""
    pre = {**QWEN2_HUB, "custom_key": 7, "nested": {"a": [1, 2]},
           "processor_class": "Qwen2VLProcessor", "feature_extractor_type": "X"}
    write_folder(tmp_path / "f", pre, "qwen2_vl")
    ours = sh.Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "f")
    ref = Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "f")
    theirs = {k: v for k, v in ref.to_dict().items() if k in ("custom_key", "nested",
                                                               "processor_class",
                                                               "feature_extractor_type")}
    assert theirs == {"custom_key": 7, "nested": {"a": [1, 2]}}  # what transformers keeps
    assert {k: ours.to_dict().get(k) for k in theirs} == theirs
    assert "processor_class" not in ours.to_dict()
    ours.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "preprocessor_config.json").read_text())
    assert saved["custom_key"] == 7 and saved["nested"] == {"a": [1, 2]}
    for clone in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert clone.custom_key == 7


def test_a_paligemma_folder_builds_its_processor_with_the_siglip_drop_in(registered, tmp_path,
                                                                        photos):
    """image_seq_length stays an attribute as there: PaliGemmaProcessor reads it.

    register() maps SiglipImageProcessor (Gemma 3n's) by name, so a PaliGemma folder gets it."""
    from transformers import AutoProcessor

    from smg_fast.testing.model_folders_gemma import make_paligemma_folder

    folder = make_paligemma_folder(tmp_path / "paligemma2-3b-mix-224")
    ours = AutoProcessor.from_pretrained(folder)
    assert type(ours.image_processor).__module__ == "smg_fast.hf"
    assert ours.image_processor.image_seq_length == 256
    IMAGE_PROCESSOR_MAPPING._extra_content.clear()  # transformers' classes again
    theirs = AutoProcessor.from_pretrained(folder)
    assert type(theirs.image_processor).__module__.startswith("transformers.")
    rgb = [p.convert("RGB") for p in photos[:2]]
    want = theirs(text=["caption en"] * 2, images=[[p] for p in rgb], return_tensors="np")
    assert same(ours(text=["caption en"] * 2, images=[[p] for p in rgb], return_tensors="np"),
                want)


def test_folder_flags_are_kept(tmp_path, photos):
    pre = {**QWEN2_HUB, "do_normalize": False}
    write_folder(tmp_path / "f", pre, "qwen2_vl")
    ours = sh.Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "f")
    ref = Qwen2VLImageProcessorPil.from_pretrained(tmp_path / "f")
    assert ours.do_normalize is False and ours.to_dict()["do_normalize"] is False
    assert same(ours(photos, return_tensors="np"), ref(photos, return_tensors="np"))


@pytest.mark.parametrize("kwargs", [
    {"do_rescale": False, "do_normalize": False}, {"do_rescale": True, "do_normalize": False},
    {"do_rescale": False}, {"size": {"shortest_edge": 3136, "longest_edge": 100_000}},
    {"min_pixels": 50_000, "max_pixels": 300_000}, {"do_pad": True},
], ids=lambda kw: "+".join(f"{k}={v}" for k, v in kw.items()))
def test_call_options_equal_transformers(kwargs, photos):
    ours, ref = sh.Qwen2VLImageProcessorPil(), Qwen2VLImageProcessorPil()
    assert same(ours(photos, return_tensors="np", **kwargs),
                ref(photos, return_tensors="np", **kwargs))


def test_calls_smg_fast_cannot_reproduce_go_to_transformers(photos, caplog):
    ours, ref = sh.Qwen2VLImageProcessorPil(), Qwen2VLImageProcessorPil()
    with caplog.at_level(logging.INFO, logger="smg_fast"):
        for _ in range(2):
            got = ours(photos[:2], return_tensors="np", device="cuda")
            assert same(got, ref(photos[:2], return_tensors="np", device="cuda"))
    lines = [r.getMessage() for r in caplog.records if "hands calls" in r.getMessage()]
    assert len(lines) == 1 and "device='cuda'" in lines[0]
    with pytest.raises(TypeError, match="not_an_option"):  # transformers' own refusal
        ours(photos[0], not_an_option=1)


def test_a_config_smg_fast_does_not_reproduce_gets_transformers_class(tmp_path, photos,
                                                                      registered, caplog):
    folder = write_folder(tmp_path / "noresize", {**QWEN2_HUB, "do_resize": False}, "qwen2_vl")
    with caplog.at_level(logging.INFO, logger="smg_fast"):
        proc = AutoImageProcessor.from_pretrained(folder, revision="main")
    assert type(proc) is Qwen2VLImageProcessorPil  # transformers' own, not smg-fast's
    assert any("do_resize" in r.getMessage() for r in caplog.records)
    small = [np.asarray(p.convert("RGB"))[:56, :84] for p in photos]
    assert same(proc(small, return_tensors="np"),
                Qwen2VLImageProcessorPil.from_pretrained(folder)(small, return_tensors="np"))


def test_size_as_transformers_sizedict_is_read_like_a_dict(photos):
    """transformers' SizeDict for size configures the class as the dict does; other types refuse."""
    from transformers.image_utils import SizeDict

    big = np.zeros((3000, 4000, 3), np.uint8)
    size = SizeDict(shortest_edge=3136, longest_edge=12845056)
    ours = sh.Qwen2VLImageProcessorPil(size=size)(big, return_tensors="np")
    ref = Qwen2VLImageProcessorPil(size=size)(big, return_tensors="np")
    assert np.array_equal(ours["image_grid_thw"], ref["image_grid_thw"])
    assert np.array_equal(ours["pixel_values"], ref["pixel_values"])
    with pytest.raises(ValueError, match="size must be a mapping"):
        sh.Qwen2VLImageProcessorPil(size=[3136, 12845056])


def test_engine_plugins_register_only_families_proven_in_the_engines():
    """register(engines=True), what the plug-ins call, leaves unproven families to transformers."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from smg_fast.processors.registry import registered

    saved = dict(IMAGE_PROCESSOR_MAPPING._extra_content)
    try:
        for_engines = sh.register(engines=True)
        everything = sh.register()
    finally:
        IMAGE_PROCESSOR_MAPPING._extra_content.clear()
        IMAGE_PROCESSOR_MAPPING._extra_content.update(saved)
    assert "qwen2_vl" in for_engines and "qwen3_vl" in for_engines
    for fam in registered():
        if fam.dropin is not None and fam.dropin.auto_register and not fam.dropin.in_engines:
            known = [t for t in fam.model_types if t in CONFIG_MAPPING]
            assert known and not set(known) & set(for_engines), fam.name
            assert set(known) <= set(everything), fam.name


def _same(ours, theirs) -> bool:
    return set(ours) == set(theirs) and all(
        np.array_equal(np.asarray(ours[k]), np.asarray(theirs[k])) for k in theirs)


@pytest.mark.parametrize("flags", [{"do_normalize": None}, {"do_rescale": None},
                                   {"do_rescale": None, "do_normalize": None}])
def test_a_none_flag_skips_its_step_as_transformers_does(flags):
    """transformers tests each flag for truth: None given anywhere skips the step."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    img = np.random.default_rng(0).integers(0, 256, (60, 90, 3), dtype=np.uint8)
    for ours_cls, theirs_cls in ((sh.Qwen2VLImageProcessorPil, Qwen2VLImageProcessorPil),
                                 (sh.Gemma3ImageProcessorPil, Gemma3ImageProcessorPil)):
        ref = theirs_cls(**flags)(img, return_tensors="np")
        assert _same(ours_cls(**flags)(img, return_tensors="np"), ref)  # constructor
        assert _same(ours_cls()(img, return_tensors="np", **flags), ref)  # call
        ours, theirs = ours_cls(), theirs_cls()
        for k, v in flags.items():
            setattr(ours, k, v)
            setattr(theirs, k, v)
        assert _same(ours(img, return_tensors="np"), theirs(img, return_tensors="np"))


def test_input_data_format_from_the_constructor_or_an_attribute_is_each_calls_default():
    img = np.random.default_rng(1).integers(0, 256, (3, 60, 3), dtype=np.uint8)  # ambiguous
    ref = Qwen2VLImageProcessorPil(input_data_format="channels_last")(img, return_tensors="np")
    ours = sh.Qwen2VLImageProcessorPil(input_data_format="channels_last")
    assert _same(ours(img, return_tensors="np"), ref)
    assert ours.to_dict()["input_data_format"] == "channels_last"
    ours, theirs = sh.Qwen2VLImageProcessorPil(), Qwen2VLImageProcessorPil()
    ours.input_data_format = theirs.input_data_format = "channels_last"
    assert _same(ours(img, return_tensors="np"), theirs(img, return_tensors="np"))


def test_patch_count_refuses_the_aspect_ratio_transformers_refuses():
    with pytest.raises(ValueError, match="aspect ratio"):
        Qwen2VLImageProcessorPil().get_number_of_image_patches(3, 10000, {})
    with pytest.raises(ValueError, match="aspect ratio"):
        sh.Qwen2VLImageProcessorPil().get_number_of_image_patches(3, 10000, {})
