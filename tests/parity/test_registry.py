"""The processor registry.

A family registered in one place is what load_processor, config folders and the server use; nothing
else needs to know it."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import smg_fast
from smg_fast.errors import UnsupportedCallError
from smg_fast.processors import get_family, names, register
from smg_fast.processors import registry as reg
from smg_fast.processors.families import QwenVLProcessor


def test_builtin_families_are_registered_in_order():
    assert names() == ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25", "glm4v", "glm46v",
                       "paddleocr_vl", "ernie4_5_vl_moe", "hunyuan_vl",
                       "gemma3", "kimi_vl", "keye", "gemma4", "gemma3n",
                       "internvl", "pixtral", "llava_next", "llava_onevision", "idefics3",
                       "smolvlm", "llama4", "phi4_multimodal") == smg_fast.FAMILIES
    assert get_family("qwen3_vl").processor is QwenVLProcessor
    with pytest.raises(ValueError, match="unknown family"):
        get_family("llava")


@pytest.fixture
def toy_family():
    """A new family: Qwen2-VL's computation with its own name, model_type and defaults."""
    base = get_family("qwen2_vl")
    fam = dataclasses.replace(base, name="toy_vl", model_types=("toy_vl",),
                              builtin=dataclasses.replace(base.builtin, family="toy_vl",
                                                          max_pixels=200_000),
                              recognizes=lambda pre: False)
    register(fam)
    yield fam
    reg._FAMILIES.pop("toy_vl")


def test_a_registered_family_loads_by_name_folder_and_in_the_server(toy_family, tmp_path,
                                                                     real_images):
    img = real_images.rgb("chelsea")
    toy = smg_fast.load_processor("toy_vl")
    ref = smg_fast.load_processor("qwen2_vl", max_pixels=200_000)
    assert np.array_equal(toy(img)["pixel_values"], ref(img)["pixel_values"])
    assert toy.config.fingerprint != ref.config.fingerprint  # the family is part of it
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "toy_vl"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"max_pixels": 100_000}))
    folder = smg_fast.load_processor(tmp_path)
    assert folder.config.family == "toy_vl" and folder.config.max_pixels == 100_000
    from smg_fast.server.models import ModelSet

    models = ModelSet([("t", "toy_vl")], 0)
    proc, _ = models.variant(models.get("t"), 50_000, 100_000)  # Qwen's per-request range
    assert isinstance(proc, QwenVLProcessor) and proc.config.family == "toy_vl"


def test_a_family_registers_once(toy_family):
    with pytest.raises(ValueError, match="registered twice"):
        register(toy_family)


def test_missing_folder_is_named_as_such():
    with pytest.raises(ValueError, match="no such model folder: '/no/such/model'"):
        smg_fast.load_processor("/no/such/model")


def test_do_normalize_false_is_rescale_only_on_both_backends(tmp_path):
    """do_normalize=false in a hub config: rescale alone, with each backend's own arithmetic.

    transformers' torchvision class multiplies the uint8 tensor by the rescale factor in float32;
    its PIL class rescales in float64 and rounds to float32 (image_mean / image_std unused)."""
    cfg = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
           "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
           "image_mean": [0.48145466, 0.4578275, 0.40821073],
           "image_std": [0.26862954, 0.26130258, 0.27577711], "do_normalize": False}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(cfg))
    u = np.arange(256, dtype=np.uint8)
    tv = smg_fast.load_processor(str(tmp_path))  # the torchvision class it names
    assert tv.config.do_normalize is False and tv.config.image_mean == tuple(cfg["image_mean"])
    assert np.array_equal(tv.pipeline("float32").lut,
                          np.tile(u.astype(np.float32) * np.float32(1 / 255), (3, 1)))
    pil = smg_fast.load_processor(str(tmp_path), backend="pil")
    assert np.array_equal(pil.pipeline("float32").lut,
                          np.tile((u.astype(np.float64) * (1 / 255)).astype(np.float32), (3, 1)))
    assert tv.config.fingerprint != smg_fast.load_processor("qwen2_vl").config.fingerprint


def test_a_familys_hooks_drive_its_call_options_and_reference(toy_family, real_images):
    """A family's CallRules name its own call options.

    Its Reference is the one the reference builder uses (none: the builder says so, never another
    family's class)."""
    from smg_fast.processors.hooks import CallRules
    from smg_fast.processors.reference import reference_class

    fam = dataclasses.replace(toy_family, name="toy2_vl", model_types=(),
                              builtin=dataclasses.replace(toy_family.builtin, family="toy2_vl"),
                              calls=CallRules({"budget": "max_pixels"}), reference=None)
    register(fam)
    try:
        img = real_images.rgb("chelsea")
        toy = smg_fast.load_processor("toy2_vl")
        ref = smg_fast.load_processor("qwen2_vl", max_pixels=100_000)
        assert np.array_equal(toy(img, budget=100_000)["pixel_values"],
                              ref(img)["pixel_values"])
        with pytest.raises(UnsupportedCallError, match="max_pixels"):
            toy(img, max_pixels=100_000)  # Qwen's option, not this family's
        assert reference_class(toy.config) == (
            None, "transformers has no 'pil' processor for toy2_vl")
    finally:
        reg._FAMILIES.pop("toy2_vl")


def test_no_module_outside_the_families_tests_a_family_by_name():
    """Family knowledge lives in processors/families/.

    No other module of the package compares a family with a name (``cfg.family == "kimi_k25"``); it
    asks the family's hooks."""
    root = Path(smg_fast.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[:2] == ("processors", "families") or rel.parts[0] in ("bench", "testing"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr == "family" or
                        isinstance(s, ast.Name) and s.id == "family" for s in sides)
            if named and any(isinstance(s, (ast.Constant, ast.Tuple, ast.List, ast.Set))
                             for s in sides):
                found.append(f"{rel}:{node.lineno}")
    assert not found, found
