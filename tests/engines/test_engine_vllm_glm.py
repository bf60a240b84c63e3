"""vLLM's own GLM-4.1V and GLM-OCR request rendering with smg-fast's plugin on and off, on CPU.

The rendering is vLLM's chat template, tokenizer and Glm4v multimodal processor on tiny
GLM-4.1V-9B-Thinking and GLM-OCR folders (the hubs' preprocessor values; GLM-OCR names the
GLM-4.6V classes, which vLLM calls through its path for processors other than Glm4vProcessor).
The reference is vLLM with the plugin off (transformers' Glm4v / Glm46V image processor):
pixel_values, grids and prompt token ids must be identical, with smg-fast's class in use.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.engine_common import engine_python_or_fail, jpeg, photo_1080p, run_on_and_off
from test_engine_vllm import ENGINES, _assert_same, _start


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


# family -> (folder name, the smg_fast.hf class vLLM must build with the plugin on)
MODELS = {"glm4v": ("GLM-4.1V-9B-Thinking", "Glm4vImageProcessor"),
          "glm_ocr": ("GLM-OCR", "Glm46VImageProcessor")}


@pytest.fixture(scope="module", params=sorted(MODELS))
def glm_folder(request, tmp_path_factory) -> Path:
    """A tiny GLM-4.1V-9B-Thinking / GLM-OCR folder: config, the hub's preprocessor values."""
    from smg_fast.testing.model_folders import make_glm_folder

    return make_glm_folder(tmp_path_factory.mktemp("engine") / MODELS[request.param][0],
                           request.param)


@pytest.fixture(scope="module")
def glm_runs(vllm_python, glm_folder, real_images, tmp_path_factory):
    """JPEG bytes and PIL RGB images rendered by two vLLM processes: plugin on, and off.

    A 1920x1080 JPEG with a PIL image at the hub's budget, then two with a smaller ``size`` in
    mm_processor_kwargs; in vLLM's default mode and with CPU normalization."""
    photo = photo_1080p(real_images)
    small = {"size": {"shortest_edge": 12544, "longest_edge": 401408}}
    requests = [{"images": [("jpeg", jpeg(photo)), ("pil", real_images.rgb("astronaut"))]},
                {"images": [("jpeg", real_images.bytes("rocket")),
                            ("pil", real_images.rgb("coffee"))], "mm_processor_kwargs": small}]
    base = tmp_path_factory.mktemp("vllm-glm-runs")

    def start(work, plugin, overlay):
        return _start(vllm_python, work, glm_folder, requests, overlay, plugin, runs=ENGINES)

    return run_on_and_off(start, base, "vLLM")


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(glm_runs, glm_folder):
    """smg-fast's GLM class computes vLLM's GLM images, identical to transformers'."""
    (ours, ours_log), (ref, _) = glm_runs
    named = dict(MODELS.values())[glm_folder.name]
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == f"smg_fast.hf.{named}"
        ref_class = run_ref["image_processor"]
        assert ref_class.startswith("transformers.") and ref_class.endswith(f".{named}"), ref_class
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    _assert_same(ours, ref)
    uint8_run, float_run = ours["runs"]
    assert uint8_run["requests"][0]["fields"]["pixel_values"][0].dtype == np.uint8
    assert float_run["requests"][0]["fields"]["pixel_values"][0].dtype == np.uint16  # bfloat16
    small = [g.tolist() for g in uint8_run["requests"][1]["fields"]["image_grid_thw"]]
    assert small == [[1, 26, 38], [1, 26, 38]]  # the smaller size applied (427x640, 400x600)
    request = uint8_run["requests"][0]
    grids = [g.tolist() for g in request["fields"]["image_grid_thw"]]
    assert grids == [[1, 78, 138], [1, 36, 36]]  # 1920x1080 -> 1932x1092, 512x512 -> 504x504
    config = json.loads((glm_folder / "config.json").read_text())
    ids = request["prompt_token_ids"]
    begin = [i for i, t in enumerate(ids) if t == config["image_start_token_id"]]
    for at, (t, h, w) in zip(begin, grids, strict=True):  # each image's tokens between its markers
        n = t * h * w // 4
        assert ids[at + 1:at + 2 + n] == [config["image_token_id"]] * n + [
            config["image_end_token_id"]]
