"""smg_fast.hf's classes follow their attributes as transformers' do.

A value set after construction (``proc.size = ...``, what vLLM's Qwen3-VL-based models and
evaluation harnesses do) applies to the next call, and calls smg-fast does not reproduce, found
only once the inputs are read, go to transformers' own class instead of raising. The reference
is transformers' Qwen2VLImageProcessorPil with the same attribute set (the main environment has
no torchvision; tests/engines/test_hf_engines.py covers the torchvision classes).
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

import smg_fast.hf as sh

HUB = dict(min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2,
           merge_size=2, image_mean=[0.48145466, 0.4578275, 0.40821073],
           image_std=[0.26862954, 0.26130258, 0.27577711])

# attribute -> the value a user or an engine sets after construction
CHANGES = {
    "size": {"shortest_edge": 3136, "longest_edge": 50000},
    "max_pixels": 80000,
    "min_pixels": 1_500_000,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.25, 0.5, 0.75],
    "patch_size": 16,
    "merge_size": 1,
    "resample": 2,
    "rescale_factor": 1 / 127.5,
    "do_resize": False,
}


@pytest.fixture(scope="module")
def two_photos(real_images):
    """rocket (RGB) and logo (RGBA): an opaque and a transparent image in one batch."""
    return [real_images.rgb("rocket"), real_images.open("logo")]


def _pair():
    return Qwen2VLImageProcessorPil(**HUB), sh.Qwen2VLImageProcessorPil(**HUB)


def _assert_same(ours, ref):
    for key in ("pixel_values", "image_grid_thw"):
        a, b = np.asarray(ours[key]), np.asarray(ref[key])
        assert a.dtype == b.dtype and a.shape == b.shape, (key, a.dtype, b.dtype, a.shape)
        assert np.array_equal(a, b), key


@pytest.mark.parametrize("attr", CHANGES)
def test_attribute_set_after_construction_applies(attr, two_photos):
    ref, ours = _pair()
    before = ours(two_photos, return_tensors="np")
    setattr(ref, attr, CHANGES[attr])
    setattr(ours, attr, CHANGES[attr])
    try:
        expected = ref(two_photos, return_tensors="np")
    except Exception as exc:  # transformers' own refusal is the reference's answer
        with pytest.raises(type(exc)):
            ours(two_photos, return_tensors="np")
        return
    got = ours(two_photos, return_tensors="np")
    _assert_same(got, expected)
    old, new = np.asarray(before["pixel_values"]), np.asarray(got["pixel_values"])
    assert old.shape != new.shape or not np.array_equal(old, new), "the change had no effect"


def test_patch_count_follows_size(two_photos):
    ref, ours = _pair()
    for p in (ref, ours):
        p.size = dict(CHANGES["size"])
    assert ours.get_number_of_image_patches(1080, 1920) == \
        ref.get_number_of_image_patches(1080, 1920)


def test_copy_keeps_its_own_attributes(two_photos):
    import copy

    ref, ours = _pair()
    twin = copy.deepcopy(ours)
    twin.max_pixels = 80000
    ref.max_pixels = 80000
    _assert_same(twin(two_photos, return_tensors="np"), ref(two_photos, return_tensors="np"))
    untouched = Qwen2VLImageProcessorPil(**HUB)
    _assert_same(ours(two_photos, return_tensors="np"), untouched(two_photos, return_tensors="np"))


@pytest.mark.parametrize("case", ["unit_float_rescaled", "convert_rgb_off_grey"])
def test_calls_found_unsupported_late_go_to_transformers(case, real_images, caplog):
    """Inputs smg-fast refuses only once it reads them: transformers' class computes them."""
    ref, ours = _pair()
    if case == "unit_float_rescaled":  # transformers divides by 255 twice; smg-fast does not
        images, kwargs = [real_images.rgb_array("coffee").astype(np.float32) / 255], {}
    else:
        images = [real_images.open("camera")]  # a grey PIL image kept grey
        kwargs = {"do_convert_rgb": False}
        try:
            expected = ref(images, return_tensors="np", **kwargs)
        except Exception as exc:  # transformers' own refusal is the reference's answer
            with pytest.raises(type(exc)):
                ours(images, return_tensors="np", **kwargs)
            return
    expected = ref(images, return_tensors="np", **kwargs)
    _assert_same(ours(images, return_tensors="np", **kwargs), expected)


@pytest.mark.parametrize("attr", ["image_mean", "image_std"])
def test_array_attribute_applies(attr, two_photos):
    """A numpy array set as mean or std (it compares element-wise) is honoured, not a crash."""
    ref, ours = _pair()
    value = np.array([0.5, 0.4, 0.3], dtype=np.float32)
    setattr(ref, attr, value)
    setattr(ours, attr, value)
    _assert_same(ours(two_photos, return_tensors="np"), ref(two_photos, return_tensors="np"))


@pytest.mark.parametrize("kwargs", [{"max_pixels": 1000},
                                    {"min_pixels": 50000, "max_pixels": 5000}])
def test_max_below_min_is_computed_as_transformers_does(kwargs, two_photos):
    """A budget whose maximum is under its minimum gets transformers' grid.

    For example an engine's mm_processor_kwargs lowering max_pixels below the default min_pixels:
    transformers computes a grid, and so must we."""
    ref, ours = _pair()
    _assert_same(ours(two_photos, return_tensors="np", **kwargs),
                 ref(two_photos, return_tensors="np", **kwargs))


def test_no_images_is_a_type_error():
    with pytest.raises(TypeError):
        sh.Qwen2VLImageProcessorPil(**HUB)(None)


@pytest.mark.parametrize("key", ["_proc", "_reference", "_ref_lock", "smg_processor"])
def test_config_keys_named_like_our_internals_are_harmless(key, two_photos, real_images):
    """Config keys named like smg-fast's internals stay harmless plain attributes.

    transformers' class keeps them; they cannot replace the processor, its transformers fallback
    or a property of smg-fast's class."""
    ref = Qwen2VLImageProcessorPil(**HUB, **{key: 1})
    ours = sh.Qwen2VLImageProcessorPil(**HUB, **{key: 1})
    assert callable(ours.smg_processor)
    _assert_same(ours(two_photos, return_tensors="np"), ref(two_photos, return_tensors="np"))
    unit = [real_images.rgb_array("coffee").astype(np.float32) / 255]  # goes to the fallback
    _assert_same(ours(unit, return_tensors="np"), ref(unit, return_tensors="np"))
