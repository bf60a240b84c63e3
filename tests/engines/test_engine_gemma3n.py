"""vLLM's and SGLang's own Gemma 3n request processing with smg-fast's plug-in on and off, on CPU.

Each engine's chat template, tokenizer and Gemma 3n multimodal processor (vLLM's gemma3n_mm,
SGLang's Gemma3nSGLangProcessor) on a tiny gemma-3n-E4B-it folder (the hub's
preprocessor_config.json, which holds the SigLIP image processor's and the audio feature
extractor's settings), one engine process per arm. The reference is the engine with the plug-in
off (transformers' SiglipImageProcessor, which Gemma3nProcessor holds): pixel_values and prompt
token ids must be identical, with smg-fast's class in use.

transformers resolves a registered class by its name, so a folder of another model type that
names SiglipImageProcessor gets the drop-in too once Gemma 3n's is registered: a tiny
paligemma2-3b-mix-224 folder (224 px, normalized) in vLLM shows that exact as well.
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

from smg_fast.testing.model_folders_gemma import make_gemma3n_folder, make_paligemma_folder

OURS = "smg_fast.hf.SiglipImageProcessor"
TRANSFORMERS = "transformers.models.siglip.image_processing_siglip.SiglipImageProcessor"
# vLLM's default (pixel_values cast to the model's bfloat16), and float32
VLLM_ENGINES = [{}, {"dtype": "float32"}]
TOKENS_PER_IMAGE = 256  # Gemma3nProcessor's image_seq_length


@pytest.fixture(scope="module")
def gemma3n_folder(tmp_path_factory) -> Path:
    return make_gemma3n_folder(tmp_path_factory.mktemp("engine") / "gemma-3n-E4B-it")


@pytest.fixture(scope="module")
def requests(real_images) -> list[dict]:
    """A 1920x1080 JPEG and a 512x512 PIL RGB image in one request."""
    return [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                        ("pil", real_images.rgb("astronaut"))]}]


@pytest.fixture(scope="module")
def vllm_runs(vllm_python, gemma3n_folder, requests, tmp_path_factory):
    """The request rendered by two vLLM processes (plug-in on, off) in each of VLLM_ENGINES."""
    def start(work, plugin, overlay):
        return start_vllm(vllm_python, work, gemma3n_folder, requests, overlay, plugin,
                          runs=VLLM_ENGINES)

    return run_on_and_off(start, tmp_path_factory.mktemp("vllm-gemma3n-runs"), "vLLM")


@pytest.fixture(scope="module")
def sglang_runs(sglang_python, gemma3n_folder, requests, tmp_path_factory):
    """The request processed by two SGLang processes: the plug-in on, off."""
    def start(work, plugin, overlay):
        return start_sglang(sglang_python, work, gemma3n_folder, [{"requests": requests}],
                            overlay, plugin)

    return run_on_and_off(start, tmp_path_factory.mktemp("sglang-gemma3n-runs"), "SGLang")


def test_vllm_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(vllm_runs,
                                                                      gemma3n_folder):
    """smg-fast's SigLIP class computes vLLM's Gemma 3n images, identical to transformers'."""
    (ours, ours_log), (ref, _) = vllm_runs
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == OURS
        assert run_ref["image_processor"] == TRANSFORMERS
        assert [r["image_processor"] for r in run_ours["requests"]] == [OURS]
        assert [r["image_processor"] for r in run_ref["requests"]] == [TRANSFORMERS]
        assert_same_requests(run_ours["requests"], run_ref["requests"], ("pixel_values",))
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert "computes it" not in ours_log  # and built every processor
    for run, dtype in zip(ours["runs"], (np.uint16, np.float32), strict=True):  # uint16: bf16
        (request,) = run["requests"]
        assert [p.shape for p in request["fields"]["pixel_values"]] == [(3, 768, 768)] * 2
        assert request["fields"]["pixel_values"][0].dtype == dtype
        assert image_token_count(request, gemma3n_folder) == 2 * TOKENS_PER_IMAGE


def test_sglang_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(sglang_runs,
                                                                         gemma3n_folder):
    """smg-fast's SigLIP class computes SGLang's Gemma 3n images, identical to transformers'."""
    (ours, ours_log), (ref, _) = sglang_runs
    (run_ours,), (run_ref,) = ours["runs"], ref["runs"]
    assert run_ours["image_processor"] == OURS
    assert run_ref["image_processor"] == TRANSFORMERS
    assert "hands calls" not in ours_log
    assert_same_requests(run_ours["requests"], run_ref["requests"], ("pixel_values",))
    (request,) = run_ours["requests"]
    assert [(p.shape[-3:], p.dtype) for p in request["fields"]["pixel_values"]] == [
        ((3, 768, 768), np.float32)] * 2
    assert image_token_count(request, gemma3n_folder) == 2 * TOKENS_PER_IMAGE


@pytest.fixture(scope="module")
def paligemma_runs(vllm_python, real_images, tmp_path_factory):
    """Two one-image requests (PaliGemma takes one) rendered by two vLLM processes: on, off."""
    base = tmp_path_factory.mktemp("vllm-paligemma-runs")
    folder = make_paligemma_folder(base / "paligemma2-3b-mix-224")
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images)))], "text": "caption en"},
                {"images": [("pil", real_images.rgb("astronaut"))], "text": "caption en"}]
    engines = [{**e, "limit_mm_per_prompt": {"image": 1}} for e in VLLM_ENGINES]

    def start(work, plugin, overlay):
        return start_vllm(vllm_python, work, folder, requests, overlay, plugin, runs=engines)

    return run_on_and_off(start, base, "vLLM")


def test_a_paligemma_folder_gets_the_siglip_drop_in_in_vllm_and_the_same_images(paligemma_runs):
    """PaliGemma's SiglipImageProcessor resolves to smg-fast's by name; vLLM's images are equal."""
    (ours, ours_log), (ref, _) = paligemma_runs
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert run_ours["image_processor"] == OURS
        assert run_ref["image_processor"] == TRANSFORMERS
        assert_same_requests(run_ours["requests"], run_ref["requests"], ("pixel_values",))
    assert "hands calls" not in ours_log
    for run, dtype in zip(ours["runs"], (np.uint16, np.float32), strict=True):
        for request in run["requests"]:
            (pixels,) = request["fields"]["pixel_values"]
            assert (pixels.shape, pixels.dtype) == ((3, 224, 224), dtype)
