"""SGLang's own Gemma 3 request processing with smg-fast's plug-in on and off, on CPU.

SGLang's get_processor and its Gemma 3 multimodal processor (tests/engines/test_engine_sglang.py's
runner) on a tiny gemma-3-4b-it folder (the hub's preprocessor values), one SGLang process per
arm. The reference is SGLang with the plug-in off (transformers' Gemma3ImageProcessor):
pixel_values and prompt token ids must be identical, with smg-fast's class in use.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.engine_common import (
    assert_same_requests,
    engine_python_or_fail,
    jpeg,
    photo_1080p,
    run_on_and_off,
)
from test_engine_sglang import _start

from smg_fast.testing.model_folders_gemma import make_gemma3_folder


@pytest.fixture(scope="module")
def sglang_python() -> Path:
    return engine_python_or_fail("sglang")


@pytest.fixture(scope="module")
def gemma3_sglang_runs(sglang_python, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image processed by two SGLang processes: on, off."""
    base = tmp_path_factory.mktemp("sglang-gemma3-runs")
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                            ("pil", real_images.rgb("astronaut"))]}]
    folder = make_gemma3_folder(base / "gemma-3-4b-it")
    runs = [{"requests": requests}]

    def start(work, plugin, overlay):
        return _start(sglang_python, work, folder, runs, overlay, plugin)

    on, off = run_on_and_off(start, base, "SGLang")
    return on, off, folder


def test_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(gemma3_sglang_runs):
    """smg-fast's Gemma 3 class computes SGLang's Gemma 3 images, identical to transformers'."""
    (ours, ours_log), (ref, _), folder = gemma3_sglang_runs
    (run_ours,), (run_ref,) = ours["runs"], ref["runs"]
    assert run_ours["image_processor"] == "smg_fast.hf.Gemma3ImageProcessor"
    assert run_ref["image_processor"] == (
        "transformers.models.gemma3.image_processing_gemma3.Gemma3ImageProcessor")
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert_same_requests(run_ours["requests"], run_ref["requests"], ("pixel_values",))
    (request,) = run_ours["requests"]
    assert [(p.shape, p.dtype) for p in request["fields"]["pixel_values"]] == [
        ((1, 3, 896, 896), np.float32)] * 2
    config = json.loads((folder / "config.json").read_text())
    assert request["prompt_token_ids"].count(config["image_token_index"]) == 2 * 256
