"""SGLang's own PaddleOCR-VL request processing with smg-fast's plug-in on and off, on CPU.

SGLang's get_processor and its PaddleOCR-VL multimodal processor (tests/engines/
test_engine_sglang.py's runner) on a tiny PaddleOCR-VL folder (smg_fast.testing.
model_folders_qwen_like: the hub's preprocessor values), one SGLang process per arm. The
reference is SGLang with the plug-in off (transformers' PaddleOCRVLImageProcessor): pixel_values,
grids and prompt token ids must be identical, with smg-fast's class in use.
"""

from __future__ import annotations

import pytest
from support.engine_common import (
    assert_same_requests,
    jpeg,
    photo_1080p,
    run_on_and_off,
)
from test_engine_sglang import _start

from smg_fast.testing.model_folders_qwen_like import make_qwen_like_folder

NAME = "PaddleOCRVLImageProcessor"  # the class SGLang must build, smg-fast's with the plug-in on


@pytest.fixture(scope="module")
def paddle_sglang_runs(sglang_python, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image by two SGLang processes: plug-in on, and off."""
    base = tmp_path_factory.mktemp("sglang-paddle-runs")
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                            ("pil", real_images.rgb("astronaut"))]}]
    folder = make_qwen_like_folder(base / "PaddleOCR-VL", "paddleocr_vl")
    runs = [{"folder": str(folder), "requests": requests}]

    def start(work, plugin, overlay):
        return _start(sglang_python, work, folder, runs, overlay, plugin)

    return run_on_and_off(start, base, "SGLang")


def test_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(paddle_sglang_runs):
    """smg-fast's PaddleOCR-VL class computes SGLang's images, identical to transformers'."""
    (ours, ours_log), (ref, _) = paddle_sglang_runs
    assert [r["image_processor"] for r in ours["runs"]] == [f"smg_fast.hf.{NAME}"]
    (run,) = ref["runs"]
    assert run["image_processor"].startswith("transformers."), run["image_processor"]
    assert run["image_processor"].endswith(f".{NAME}"), run["image_processor"]
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert_same_requests(ours["runs"][0]["requests"], ref["runs"][0]["requests"])
    grids = [g.reshape(-1).tolist() for g in ours["runs"][0]["requests"][0]["fields"][
        "image_grid_thw"]]
    assert grids == [[1, 78, 138], [1, 36, 36]]  # as in test_engine_vllm_qwen_like.py, by hand
