"""vLLM's own video request rendering with smg-fast's plug-in on and off, on CPU in vLLM's venv.

The rendering is vLLM's chat template, tokenizer, video loader (OpenCV, its default) and its
Qwen2-VL / Qwen3-VL multimodal processors, which call transformers' video processor on the frames
vLLM decoded (Qwen3-VL with vLLM's VideoMetadata, one call per video). A small H.264 clip made
here with PyAV goes in as a data: URL, next to a JPEG in the same prompt. The reference is vLLM
with the plug-in off (transformers' Qwen2VLVideoProcessor / Qwen3VLVideoProcessor):
pixel_values_videos, video_grid_thw, Qwen3-VL's timestamps and the prompt token ids must be
identical, with smg-fast's video class in use and no call handed back to transformers. Both of
vLLM's modes run: its default (uint8 patches, normalized on the device) and
``mm_device_do_normalize=False`` (float32, cast by vLLM to the model's bfloat16).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.engine_common import run_on_and_off
from test_engine_vllm import ENGINES, _assert_same, _start

from smg_fast.testing.video_clips import make_clip

# family -> (the video_preprocessor_config.json the tiny folder gets, the video class)
MODELS = {"qwen2_vl": (None, "Qwen2VLVideoProcessor"),
          "qwen3_vl": ("QWEN3_VIDEO_PREPROCESSOR", "Qwen3VLVideoProcessor")}
VIDEO_FIELDS = {"qwen2_vl": ("pixel_values_videos", "video_grid_thw"),
                "qwen3_vl": ("pixel_values_videos", "video_grid_thw", "timestamps")}


@pytest.fixture(scope="module", params=sorted(MODELS))
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def video_runs(vllm_python, family, real_images, tmp_path_factory):
    """A clip with a JPEG, then a longer clip alone under a smaller per-request pixel budget."""
    from smg_fast.testing import model_folders

    base = tmp_path_factory.mktemp(f"vllm-video-{family}")
    video_config, _ = MODELS[family]
    folder = model_folders.make_qwen_folder(
        base / family, family,
        video=None if video_config is None else getattr(model_folders, video_config))
    short = make_clip("h264", 176, 100, 24, fps=12)
    longer = make_clip("h264", 320, 240, 48, fps=24)
    requests = [{"images": [("jpeg", real_images.bytes("rocket"))], "videos": [("mp4", short)],
                 "text": "Describe the picture and the video."},
                {"videos": [("mp4", longer)], "text": "Describe the video.",
                 "mm_processor_kwargs": {"size": {"shortest_edge": 4096,
                                                  "longest_edge": 65536}}}]

    def start(work, plugin, overlay):
        return _start(vllm_python, work, folder, requests, overlay, plugin, runs=ENGINES)

    return folder, run_on_and_off(start, base, "vLLM")


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(video_runs, family):
    folder, ((ours, ours_log), (ref, ref_log)) = video_runs
    _, cls = MODELS[family]
    for run in ours["runs"]:
        assert run["video_processor"] == f"smg_fast.hf_video.{cls}", run["video_processor"]
        assert run["smg_fast_video_instances"] >= 1  # smg-fast computed the calls
        assert all(r["video_processor"] == run["video_processor"] for r in run["requests"])
    for run in ref["runs"]:
        assert run["smg_fast_video_instances"] == 0
        assert run["video_processor"].startswith("transformers.models."), run["video_processor"]
        assert run["video_processor"].endswith(f".{cls}"), run["video_processor"]
    assert "hands calls" not in ours_log  # smg-fast computed every video call
    assert "videos of qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe with smg_fast.hf_video" \
        in ours_log
    assert f"({family}) computes videos with smg_fast.hf_video.{cls} (smg-fast serves its " \
        "videos)" in ours_log
    assert f"({family}) computes videos with transformers." in ref_log
    assert "(SMG_FAST_VLLM=0)" in ref_log
    _assert_same(ours, ref, VIDEO_FIELDS[family])
    uint8_run, float_run = ours["runs"]
    assert uint8_run["requests"][0]["fields"]["pixel_values_videos"][0].dtype == np.uint8
    # vLLM casts CPU-normalized pixels to the model's dtype (bfloat16: kept as its uint16 bits)
    assert float_run["requests"][0]["fields"]["pixel_values_videos"][0].dtype == np.uint16
    config = json.loads((folder / "config.json").read_text())
    for run in ours["runs"]:
        for request in run["requests"]:
            grids = request["fields"]["video_grid_thw"]
            tokens = sum(int(np.prod(g)) // 4 for g in grids)  # merge_size 2
            assert request["prompt_token_ids"].count(config["video_token_id"]) == tokens


# By hand, for each request's video (frames as vLLM's loader keeps them). Qwen2-VL (factor 28,
# the image budget): 176x100 -> 168x112 (8x12). Qwen3-VL (factor 32): 176x100 -> 192x96 (6x12).
# The second request's 320x240 frames under 65536 pixels: Qwen2-VL per frame, 308x252 is over,
# scaled by sqrt(76800 / 65536) and floored -> 280x196 (14x20); Qwen3-VL counts the frames
# against the budget.
SPATIAL = {"qwen2_vl": ([8, 12], [14, 20]), "qwen3_vl": ([6, 12], None)}


def test_the_grids_are_the_video_rules(video_runs, family):
    _, ((ours, _), _) = video_runs
    for run in ours["runs"]:
        for request, spatial in zip(run["requests"], SPATIAL[family], strict=True):
            (grid,) = request["fields"]["video_grid_thw"]
            assert grid[0] >= 1
            if spatial is not None:
                assert grid[1:].tolist() == spatial, grid
