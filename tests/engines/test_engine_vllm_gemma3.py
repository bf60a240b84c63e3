"""vLLM's own Gemma 3 request rendering with smg-fast's plug-in on and off, on CPU.

The rendering is vLLM's chat template, tokenizer and Gemma 3 multimodal processor on a tiny
gemma-3-4b-it folder (the hub's preprocessor values), in vLLM's default mode, and once more with
pan-and-scan asked for in mm_processor_kwargs. The reference is vLLM with the plug-in off
(transformers' Gemma3ImageProcessor): pixel_values, num_patches and prompt token ids must be
identical, with smg-fast's class in use (vLLM builds the processor for a pan-and-scan request
with do_pan_and_scan=True, and calls it with the three pan-and-scan settings).
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
from test_engine_vllm import _start

from smg_fast.testing.model_folders_gemma import make_gemma3_folder

FIELDS = ("pixel_values", "num_patches")
OURS = "smg_fast.hf.Gemma3ImageProcessor"
TRANSFORMERS = "transformers.models.gemma3.image_processing_gemma3.Gemma3ImageProcessor"
# vLLM's default (pixel_values cast to the model's bfloat16), and float32 (the processor's own
# float32 values, which the bfloat16 cast would round)
ENGINES = [{}, {"dtype": "float32"}]


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def gemma3_folder(tmp_path_factory) -> Path:
    return make_gemma3_folder(tmp_path_factory.mktemp("engine") / "gemma-3-4b-it")


@pytest.fixture(scope="module")
def gemma3_runs(vllm_python, gemma3_folder, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image rendered by two vLLM processes: plug-in on, off.

    Twice (as the folder says, and with do_pan_and_scan=True in mm_processor_kwargs) in each of
    ENGINES."""
    images = [("jpeg", jpeg(photo_1080p(real_images))), ("pil", real_images.rgb("astronaut"))]
    requests = [{"images": images},
                {"images": images, "mm_processor_kwargs": {"do_pan_and_scan": True}}]
    base = tmp_path_factory.mktemp("vllm-gemma3-runs")

    def start(work, plugin, overlay):
        return _start(vllm_python, work, gemma3_folder, requests, overlay, plugin, runs=ENGINES)

    return run_on_and_off(start, base, "vLLM")


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(gemma3_runs, gemma3_folder):
    """smg-fast's Gemma 3 class computes vLLM's Gemma 3 images, identical to transformers'."""
    (ours, ours_log), (ref, _) = gemma3_runs
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == OURS
        assert run_ref["image_processor"] == TRANSFORMERS
        # vLLM builds the processor for a pan-and-scan request with do_pan_and_scan=True
        assert [r["image_processor"] for r in run_ours["requests"]] == [OURS] * 2
        assert [r["image_processor"] for r in run_ref["requests"]] == [TRANSFORMERS] * 2
        assert_same_requests(run_ours["requests"], run_ref["requests"], FIELDS)
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert "computes it" not in ours_log  # and built every processor
    config = json.loads((gemma3_folder / "config.json").read_text())
    for run, dtype in zip(ours["runs"], (np.uint16, np.float32), strict=True):  # uint16: bf16
        plain, panned = run["requests"]
        assert [p.shape for p in plain["fields"]["pixel_values"]] == [(1, 3, 896, 896)] * 2
        assert plain["fields"]["pixel_values"][0].dtype == dtype
        # the 1920x1080 photo: the whole image and two 960x1080 crops; the square one: itself
        assert [p.shape[0] for p in panned["fields"]["pixel_values"]] == [3, 1]
        assert [int(n) for n in panned["fields"]["num_patches"]] == [3, 1]
        for request, tokens in ((plain, 2 * 256), (panned, 4 * 256)):
            assert request["prompt_token_ids"].count(config["image_token_index"]) == tokens
