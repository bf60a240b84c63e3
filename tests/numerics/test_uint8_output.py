"""dtype="uint8": the resized bytes in the patch layout, written natively (no float pass).

What transformers' torchvision classes return for do_rescale=False, do_normalize=False (checked
in the oracle venv: tests/engines/test_hf_engines.py); here against transformers' PIL class,
whose output for those options is the same values as float32, on real images, PIL images (read
as 4-byte RGBX) and numpy arrays (3 bytes), every patch layout (patch sizes with and without a
specialised copy, below the SIMD kernels' minimum too, merge 1, 2 and 3, one to three temporal
copies).
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

import smg_fast

RAW = {"do_rescale": False, "do_normalize": False}
LAYOUTS = [{}, {"patch_size": 16}, {"patch_size": 10, "merge_size": 1, "temporal_patch_size": 1},
           {"patch_size": 7, "merge_size": 3, "temporal_patch_size": 3},
           {"patch_size": 3, "temporal_patch_size": 1}]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda d: str(d.get("patch_size", 14)))
@pytest.mark.parametrize("name", ["chelsea", "rocket", "logo", "camera"])
def test_uint8_is_the_resized_bytes(name, layout, real_images):
    ref = Qwen2VLImageProcessorPil(size={"shortest_edge": 3136, "longest_edge": 400_000})
    ours = smg_fast.load_processor("qwen2_vl", min_pixels=3136, max_pixels=400_000)
    for image in (real_images.open(name), real_images.rgb_array(name)):
        want = ref(image, return_tensors="np", **RAW, **layout)
        got = ours(image, dtype="uint8", **layout)
        assert got["pixel_values"].dtype == np.uint8
        assert np.array_equal(got["pixel_values"].astype(np.float32), want["pixel_values"])
        assert np.array_equal(got["image_grid_thw"], want["image_grid_thw"])


def test_uint8_ignores_the_normalization_but_not_the_geometry(real_images):
    img = real_images.rgb_array("coffee")
    a = smg_fast.load_processor("qwen2_vl", backend="torchvision", image_mean=[0.5] * 3)
    b = smg_fast.load_processor("qwen2_vl", backend="torchvision")
    assert np.array_equal(a(img, dtype="uint8")["pixel_values"],
                          b(img, dtype="uint8")["pixel_values"])
    assert a.pipeline("uint8").lut.dtype == np.uint8
    assert np.array_equal(a.pipeline("uint8").lut, np.tile(np.arange(256, dtype=np.uint8), (3, 1)))
