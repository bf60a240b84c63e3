"""vLLM's own PaddleOCR-VL and HunyuanOCR request rendering with smg-fast's plug-in on and off.

The rendering is vLLM's chat template, tokenizer and multimodal processor (its PaddleOCR-VL
processor; for HunyuanOCR its transformers backend) on tiny PaddleOCR-VL and HunyuanOCR folders
(smg_fast.testing.model_folders_qwen_like: the hubs' preprocessor values), on CPU, as its API
server runs it. The reference is vLLM with the plug-in off (transformers' torchvision class):
pixel_values, grids and prompt token ids must be identical, with smg-fast's class in use.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.engine_common import jpeg, photo_1080p, run_on_and_off
from test_engine_vllm import ENGINES, _assert_same, _start

# family -> the smg_fast.hf class vLLM must build with the plug-in on
MODELS = {"paddleocr_vl": "PaddleOCRVLImageProcessor", "hunyuan_vl": "HunYuanVLImageProcessor"}


@pytest.fixture(scope="module", params=sorted(MODELS))
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def qwen_like_runs(vllm_python, family, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL image at the hub's budget, then two with a smaller ``size``."""
    from smg_fast.testing.model_folders_qwen_like import make_qwen_like_folder

    base = tmp_path_factory.mktemp(f"vllm-{family}-runs")
    folder = make_qwen_like_folder(base / family, family)
    small = {"size": {"shortest_edge": 12544, "longest_edge": 200704}}
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                            ("pil", real_images.rgb("astronaut"))]},
                {"images": [("jpeg", real_images.bytes("rocket")),
                            ("pil", real_images.rgb("coffee"))], "mm_processor_kwargs": small}]

    def start(work, plugin, overlay):
        return _start(vllm_python, work, folder, requests, overlay, plugin, runs=ENGINES)

    return run_on_and_off(start, base, "vLLM")


# By hand. PaddleOCR-VL (patch 14, factor 28): 1920x1080 -> 1932x1092 (78x138), 512x512 ->
# 504x504 (36x36); 640x427 and 600x400 under 200704 pixels -> 532x364 (26x38). HunyuanOCR (patch
# 16, factor 32): 1920x1080 -> 1920x1088 (68x120), 512x512 kept (32x32); both small ones ->
# 544x352 (22x34).
GRIDS = {"paddleocr_vl": ([[1, 78, 138], [1, 36, 36]], [[1, 26, 38], [1, 26, 38]]),
         "hunyuan_vl": ([[1, 68, 120], [1, 32, 32]], [[1, 22, 34], [1, 22, 34]])}


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(qwen_like_runs, family):
    (ours, ours_log), (ref, _) = qwen_like_runs
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == f"smg_fast.hf.{MODELS[family]}"
        ref_class = run_ref["image_processor"]
        assert ref_class.startswith("transformers.") and ref_class.endswith(
            f".{MODELS[family]}"), ref_class
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    _assert_same(ours, ref)
    uint8_run, float_run = ours["runs"]
    assert float_run["requests"][0]["fields"]["pixel_values"][0].dtype == np.uint16  # bfloat16
    for request, grids in zip(uint8_run["requests"], GRIDS[family], strict=True):
        assert [g.tolist() for g in request["fields"]["image_grid_thw"]] == grids
