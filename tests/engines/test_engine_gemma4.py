"""vLLM's and SGLang's own Gemma 4 request processing with smg-fast's plug-in on and off, on CPU.

Each engine's chat template, tokenizer and Gemma 4 multimodal processor (vLLM's gemma4_mm, SGLang's
Gemma4SGLangProcessor) on a tiny gemma-4-e2b-it folder (the hub's processor_config.json, its
settings nested as transformers 5 saves them), one engine process per arm. The reference is the
engine with the plug-in off (transformers' Gemma4ImageProcessor): the image fields each engine
keeps (vLLM: pixel_values, pixel_position_ids; SGLang: pixel_values, image_position_ids) and
prompt token ids must be identical, with smg-fast's class in use. A second request asks for
max_soft_tokens=70 in mm_processor_kwargs (vLLM): the budget reaches the drop-in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.engine_common import (
    assert_same_requests,
    image_token_count,
    jpeg,
    photo_1080p,
    run_on_and_off,
)
from test_engine_sglang import _start as start_sglang
from test_engine_vllm import _start as start_vllm

from smg_fast.testing.model_folders_gemma import make_gemma4_folder

OURS = "smg_fast.hf.Gemma4ImageProcessor"
TRANSFORMERS = "transformers.models.gemma4.image_processing_gemma4.Gemma4ImageProcessor"
# vLLM's default (pixel_values cast to the model's bfloat16), and float32
VLLM_ENGINES = [{}, {"dtype": "float32"}]
# Soft tokens of the 1920x1080 photo and the 512x512 astronaut, by transformers' rule (sides
# floored to multiples of 48 within max_soft_tokens * 9 patches of 16 px, 9 patches a token):
# 280: 1056x576 -> 66x36 patches -> 264, 768x768 -> 256; 70: 528x288 -> 66, 384x384 -> 64
SOFT_TOKENS = {280: [264, 256], 70: [66, 64]}


@pytest.fixture(scope="module")
def gemma4_folder(tmp_path_factory) -> Path:
    return make_gemma4_folder(tmp_path_factory.mktemp("engine") / "gemma-4-e2b-it")


@pytest.fixture(scope="module")
def images(real_images) -> list[tuple[str, object]]:
    """A 1920x1080 JPEG and a 512x512 PIL RGB image."""
    return [("jpeg", jpeg(photo_1080p(real_images))), ("pil", real_images.rgb("astronaut"))]


@pytest.fixture(scope="module")
def vllm_runs(vllm_python, gemma4_folder, images, tmp_path_factory):
    """The images rendered by two vLLM processes: the plug-in on, off.

    As the folder says and with max_soft_tokens=70, in each of VLLM_ENGINES."""
    requests = [{"images": images}, {"images": images,
                                     "mm_processor_kwargs": {"max_soft_tokens": 70}}]

    def start(work, plugin, overlay):
        return start_vllm(vllm_python, work, gemma4_folder, requests, overlay, plugin,
                          runs=VLLM_ENGINES)

    return run_on_and_off(start, tmp_path_factory.mktemp("vllm-gemma4-runs"), "vLLM")


@pytest.fixture(scope="module")
def sglang_runs(sglang_python, gemma4_folder, images, tmp_path_factory):
    """The images processed by two SGLang processes: the plug-in on, off."""
    runs = [{"requests": [{"images": images}]}]

    def start(work, plugin, overlay):
        return start_sglang(sglang_python, work, gemma4_folder, runs, overlay, plugin)

    return run_on_and_off(start, tmp_path_factory.mktemp("sglang-gemma4-runs"), "SGLang")


def test_vllm_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(vllm_runs, gemma4_folder):
    """smg-fast's Gemma 4 class computes vLLM's Gemma 4 images, identical to transformers'."""
    (ours, ours_log), (ref, _) = vllm_runs
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == OURS
        assert run_ref["image_processor"] == TRANSFORMERS
        assert [r["image_processor"] for r in run_ours["requests"]] == [OURS] * 2
        assert [r["image_processor"] for r in run_ref["requests"]] == [TRANSFORMERS] * 2
        assert_same_requests(run_ours["requests"], run_ref["requests"],
                             ("pixel_values", "pixel_position_ids"))
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert "computes it" not in ours_log  # and built every processor
    for run, dtype in zip(ours["runs"], (np.uint16, np.float32), strict=True):  # uint16: bf16
        for request, budget in zip(run["requests"], (280, 70), strict=True):
            fields = request["fields"]
            assert [p.shape for p in fields["pixel_values"]] == [(budget * 9, 768)] * 2
            assert fields["pixel_values"][0].dtype == dtype
            # each image's real patches, then -1 rows of padding
            real = [int((p[:, 0] >= 0).sum()) for p in fields["pixel_position_ids"]]
            assert real == [9 * n for n in SOFT_TOKENS[budget]]
            assert image_token_count(request, gemma4_folder) == sum(SOFT_TOKENS[budget])


def test_sglang_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(sglang_runs,
                                                                         gemma4_folder):
    """smg-fast's Gemma 4 class computes SGLang's Gemma 4 images, identical to transformers'."""
    (ours, ours_log), (ref, _) = sglang_runs
    (run_ours,), (run_ref,) = ours["runs"], ref["runs"]
    assert run_ours["image_processor"] == OURS
    assert run_ref["image_processor"] == TRANSFORMERS
    assert "hands calls" not in ours_log
    assert_same_requests(run_ours["requests"], run_ref["requests"],
                         ("pixel_values", "image_position_ids"))
    (request,) = run_ours["requests"]
    assert [(p.shape[-2:], p.dtype) for p in request["fields"]["pixel_values"]] == [
        ((2520, 768), np.float32)] * 2
    # the prompt's soft tokens are the drop-in's num_soft_tokens_per_image, expanded by
    # Gemma4Processor
    assert image_token_count(request, gemma4_folder) == sum(SOFT_TOKENS[280])
