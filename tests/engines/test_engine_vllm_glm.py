"""vLLM's own GLM-4.1V request rendering with smg-fast's plugin on and off, run on CPU.

The rendering is vLLM's chat template, tokenizer and Glm4v multimodal processor on a tiny
GLM-4.1V-9B folder (the hub's preprocessor values). The reference is vLLM with the plugin off
(transformers' Glm4vImageProcessor): pixel_values, grids and prompt token ids must be identical,
in vLLM's default mode, with smg-fast's class in use.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from support.engine_common import engine_python_or_fail, finish, jpeg
from test_engine_vllm import _assert_same, _start

from smg_fast.testing.engine_env import make_overlay


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def glm_folder(tmp_path_factory) -> Path:
    """A tiny GLM-4.1V-9B-Thinking folder: config, the hub's preprocessor values, GLM's tokens."""
    from smg_fast.testing.model_folders import make_glm4v_folder

    return make_glm4v_folder(tmp_path_factory.mktemp("engine") / "GLM-4.1V-9B-Thinking")


@pytest.fixture(scope="module")
def glm_runs(vllm_python, glm_folder, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image rendered by two vLLM processes: plugin on, and off."""
    photo = real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS)
    requests = [{"images": [("jpeg", jpeg(photo)), ("pil", real_images.rgb("astronaut"))]}]
    base = tmp_path_factory.mktemp("vllm-glm-runs")
    overlay = make_overlay(base / "overlay")
    on = _start(vllm_python, base / "on", glm_folder, requests, overlay, "1", runs=[{}])
    off = _start(vllm_python, base / "off", glm_folder, requests, overlay, "0", runs=[{}])
    return finish(on, base / "on", "vLLM"), finish(off, base / "off", "vLLM")


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(glm_runs, glm_folder):
    """smg-fast's Glm4v class computes vLLM's GLM-4.1V images, identical to transformers'."""
    (ours, ours_log), (ref, _) = glm_runs
    assert ours["runs"][0]["image_processor"] == "smg_fast.hf.Glm4vImageProcessor"
    assert ref["runs"][0]["image_processor"].startswith("transformers."), ref["runs"][0]
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    _assert_same(ours, ref)
    request = ours["runs"][0]["requests"][0]
    grids = [g.tolist() for g in request["fields"]["image_grid_thw"]]
    assert grids == [[1, 78, 138], [1, 36, 36]]  # 1920x1080 -> 1932x1092, 512x512 -> 504x504
    config = json.loads((glm_folder / "config.json").read_text())
    ids = request["prompt_token_ids"]
    begin = [i for i, t in enumerate(ids) if t == config["image_start_token_id"]]
    for at, (t, h, w) in zip(begin, grids, strict=True):  # each image's tokens between its markers
        n = t * h * w // 4
        assert ids[at + 1:at + 2 + n] == [config["image_token_id"]] * n + [
            config["image_end_token_id"]]
