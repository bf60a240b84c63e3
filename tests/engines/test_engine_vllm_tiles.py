"""vLLM's own request rendering of the tiling families with smg-fast's plug-in on and off, on CPU.

vLLM's chat template handling, tokenizer and each family's multimodal processor (llava_next,
llava_onevision, llava's Pixtral path, mllama4, interns1 for the InternVL -hf checkpoints,
idefics3, smolvlm) on tiny folders of llava-v1.6-mistral-7b-hf, llava-onevision-qwen2-7b-ov-hf,
pixtral-12b (model_type llava), Llama-4-Scout-17B-16E-Instruct, InternVL3-1B-hf (model_type
internvl), Idefics3-8B-Llama3 and SmolVLM2-500M-Video-Instruct
(smg_fast.testing.model_folders_tiles), all rendered by one vLLM process per arm. The reference
is the arm with the plug-in off (transformers' classes): every image field vLLM keeps and the
prompt token ids must be identical, with smg-fast's class in use. A third request sets
mm_processor_kwargs (Pixtral's, Idefics3's and SmolVLM's size, InternVL's max_patches), which
reach the drop-in per request. The model dtype is float32, so vLLM keeps the float32 pixels the
processors return (Llama 4's bfloat16 pixels cast to float32).

vLLM's InternVL -hf model runs transformers' InternVLProcessor, one call per image; its original
InternVL checkpoints (internvl_chat) run vLLM's own processor, which no transformers class
computes (tests/parity/test_internvl_vllm.py covers smg-fast's variant of those numerics).
transformers' SmolVLMProcessor needs num2words, which .ci/venvs/vllm.txt pins for it.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from support.engine_common import assert_same_requests, jpeg, photo_1080p, run_on_and_off
from test_engine_vllm import RUNNER

from smg_fast.testing.engine_env import start_in_venv
from smg_fast.testing.model_folders_tiles import make_tiles_folder

# family -> (smg-fast's class, transformers' class, the image fields vLLM keeps, tile side)
FAMILIES = {
    "llava_next": ("LlavaNextImageProcessor", "llava_next.image_processing_llava_next",
                   ("pixel_values", "image_sizes"), 336),
    "llava_onevision": ("LlavaOnevisionImageProcessor",
                        "llava_onevision.image_processing_llava_onevision",
                        ("pixel_values", "image_sizes"), 384),
    "pixtral": ("PixtralImageProcessor", "pixtral.image_processing_pixtral",
                ("pixel_values",), None),
    "llama4": ("Llama4ImageProcessor", "llama4.image_processing_llama4",
               ("pixel_values", "aspect_ratios", "patches_per_image"), 336),
    "internvl": ("GotOcr2ImageProcessor", "got_ocr2.image_processing_got_ocr2",
                 ("pixel_values", "image_num_patches"), 448),
    "idefics3": ("Idefics3ImageProcessor", "idefics3.image_processing_idefics3",
                 ("pixel_values", "pixel_attention_mask", "num_patches"), 364),
    "smolvlm": ("SmolVLMImageProcessor", "smolvlm.image_processing_smolvlm",
                ("pixel_values", "pixel_attention_mask", "num_patches"), 512),
}


# per-request mm_processor_kwargs a third request asks for (the first request's images), and the
# most tiles per image each allows (Pixtral: its longest side)
REQUEST_KWARGS = {
    "pixtral": ({"size": {"longest_edge": 512}}, 512),
    "internvl": ({"max_patches": 4}, 4 + 1),  # and the thumbnail
    "idefics3": ({"size": {"longest_edge": 728}}, 2 * 2 + 1),  # and the whole image
    "smolvlm": ({"size": {"longest_edge": 1024}}, 2 * 2 + 1),  # and the whole image
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Each family's tiny folder."""
    base = tmp_path_factory.mktemp("engine-tiles")
    return {family: make_tiles_folder(base / family, family) for family in FAMILIES}


@pytest.fixture(scope="module")
def requests(real_images) -> list[dict]:
    """Two images in one request (a 1920x1080 JPEG, a 512x512 PIL image), then one grey PIL."""
    return [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                        ("pil", real_images.rgb("astronaut"))]},
            {"images": [("pil", real_images.open("camera"))]}]


@pytest.fixture(scope="module")
def vllm_runs(vllm_python, folders, requests, tmp_path_factory):
    """Every family's requests rendered by two vLLM processes: the plug-in on, off."""
    runs = [{"folder": str(folder), "engine": {"dtype": "float32"},
             "requests": _requests(family, requests)} for family, folder in folders.items()]

    def start(work, plugin, overlay):
        work.mkdir(parents=True)
        job = {"folder": str(folders["llava_next"]), "runs": runs}
        (work / "job.pkl").write_bytes(pickle.dumps(job))
        return start_in_venv(vllm_python, [*RUNNER, str(work)], overlay,
                             {"SMG_FAST_VLLM": plugin})

    return run_on_and_off(start, tmp_path_factory.mktemp("vllm-tiles-runs"), "vLLM")


def _requests(family: str, requests: list[dict]) -> list[dict]:
    """The shared requests, then the family's request with mm_processor_kwargs if it has one."""
    if family not in REQUEST_KWARGS:
        return requests
    return [*requests, {**requests[0], "mm_processor_kwargs": REQUEST_KWARGS[family][0]}]


def _per_family(result: dict) -> dict[str, dict]:
    """A result's runs by family (the runs are in FAMILIES' order)."""
    return dict(zip(FAMILIES, result["runs"], strict=True))


@pytest.mark.parametrize("family", FAMILIES)
def test_vllm_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(vllm_runs, family):
    """smg-fast's class computes the family's images in vLLM, identical to transformers'."""
    (ours, _), (ref, _) = vllm_runs
    name, module, fields, _ = FAMILIES[family]
    run_ours, run_ref = _per_family(ours)[family], _per_family(ref)[family]
    expected_ours = f"smg_fast.hf.{name}"
    expected_ref = f"transformers.models.{module}.{name}"
    assert run_ours["image_processor"] == expected_ours
    assert run_ref["image_processor"] == expected_ref
    count = 3 if family in REQUEST_KWARGS else 2
    assert [r["image_processor"] for r in run_ours["requests"]] == [expected_ours] * count
    assert [r["image_processor"] for r in run_ref["requests"]] == [expected_ref] * count
    assert_same_requests(run_ours["requests"], run_ref["requests"], fields)


@pytest.mark.parametrize("family", FAMILIES)
def test_vllm_tiles_have_the_family_shape_and_dtype(vllm_runs, family):
    """Each image's pixels: its tiles at the checkpoint's side, float32.

    Llama 4's processor returns bfloat16, which vLLM casts to the model's float32: every value
    is a bfloat16 value (its low 16 bits zero)."""
    (ours, _), _ = vllm_runs
    side = FAMILIES[family][3]
    requests = _per_family(ours)[family]["requests"]
    for request, n_images in zip(requests, (2, 1, 2)[:len(requests)], strict=True):
        pixels = request["fields"]["pixel_values"]
        assert len(pixels) == n_images
        for p in pixels:
            assert p.dtype == np.float32
            if family == "llama4":
                assert not (p.view(np.uint32) & 0xFFFF).any()
            assert p.shape[-3] == 3
            if side is not None:
                assert p.shape[-2:] == (side, side) and p.ndim == 4
            else:  # Pixtral: one image, sides multiples of its 16-pixel patch, at most 1024
                assert p.ndim == 3 and max(p.shape[1:]) <= 1024
                assert p.shape[1] % 16 == 0 and p.shape[2] % 16 == 0


@pytest.mark.parametrize("family", REQUEST_KWARGS)
def test_a_request_s_mm_processor_kwargs_reach_the_drop_in(vllm_runs, family):
    """The third request's options bound its tiles as they say (and equal transformers').

    The 1920x1080 photo gets more than the bound without them; the 512x512 image may not."""
    (ours, _), _ = vllm_runs
    default, changed = _per_family(ours)[family]["requests"][0::2]
    bound = REQUEST_KWARGS[family][1]
    pairs = zip(default["fields"]["pixel_values"], changed["fields"]["pixel_values"], strict=True)
    for i, (before, after) in enumerate(pairs):
        size_before, size_after = ((max(before.shape[1:]), max(after.shape[1:]))
                                   if family == "pixtral" else (len(before), len(after)))
        assert size_after <= bound
        if i == 0:
            assert size_before > bound


def test_vllm_logs_that_smg_fast_computes_each_family(vllm_runs, folders):
    """The plug-in's per-model line names smg-fast's class for every family; no call handed back."""
    (_, log), (_, ref_log) = vllm_runs
    assert "hands calls" not in log and "computes it" not in log
    for family, (name, _, _, _) in FAMILIES.items():
        model_type = json.loads((folders[family] / "config.json").read_text())["model_type"]
        assert f"({model_type}) computes images with smg_fast.hf.{name}" in log, family
        assert f"computes images with smg_fast.hf.{name}" not in ref_log
    # a llava folder gets Pixtral's drop-in by the class it names, and the line says so
    assert ("(llava) computes images with smg_fast.hf.PixtralImageProcessor (smg-fast serves "
            "pixtral, whose PixtralImageProcessor this llava folder names)") in log
