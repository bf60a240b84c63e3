"""SGLang's own video request processing with smg-fast's plug-in on and off, on CPU.

SGLang's get_processor and its Qwen-VL multimodal processor's process_mm_data_async (the runner of
tests/engines/test_engine_sglang.py) on tiny Qwen2-VL and Qwen3-VL folders: SGLang's frame
sampling, its bilinear resize of the sampled frames, then transformers' video processor (for
Qwen3-VL with SGLang's metadata and ``do_sample_frames=False``). The reference is SGLang with the
plug-in off (transformers' Qwen2VLVideoProcessor / Qwen3VLVideoProcessor): pixel_values_videos,
video_grid_thw and the prompt token ids must be identical, with smg-fast's video class in use.

SGLang decodes videos with torchcodec or decord. Neither runs in its venv here (torchcodec loads
FFmpeg's shared libraries, which this host lacks; decord is not installed), so the runner's
decoder serves frames PyAV decoded in the test (``sglang_runner._use_decoded``, a subclass of
SGLang's ``VideoDecoderWrapper`` that ``load_video`` builds for the request's bytes): the frames
are PyAV's rather than SGLang's decoder's, and everything after decoding is SGLang's. A Qwen2-VL
request also hands SGLang decoded frames directly (its ``load_video`` passes arrays through, to
the video processor unresized).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.engine_common import assert_same_requests, run_on_and_off

from smg_fast.testing import model_folders
from smg_fast.testing.engine_env import start_in_venv
from smg_fast.testing.video_clips import make_clip

RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
# family -> (the folder's video_preprocessor_config.json, the video class SGLang must build)
MODELS = {"qwen2_vl": (None, "Qwen2VLVideoProcessor"),
          "qwen3_vl": (model_folders.QWEN3_VIDEO_PREPROCESSOR, "Qwen3VLVideoProcessor")}
# SGLang's default, and its own video options (sampling rate, pixel limit) from --mm-process-config
SERVERS = [{}, {"mm_process_config": {"video": {"fps": 4.0, "max_pixels": 50176}}}]
FIELDS = ("pixel_values_videos", "video_grid_thw")


def _decoded(clip: bytes) -> tuple[np.ndarray, float]:
    """The clip's frames (T x H x W x 3 uint8) and rate, decoded by PyAV."""
    import av

    with av.open(io.BytesIO(clip)) as container:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
        return frames, float(container.streams.video[0].average_rate)


@pytest.fixture(scope="module")
def sglang_video_runs(sglang_python, real_images, tmp_path_factory):
    """Both families, both server configs, by two SGLang processes at once: plug-in on, off."""
    base = tmp_path_factory.mktemp("sglang-video-runs")
    short = make_clip("h264", 176, 100, 24, fps=12)
    longer = make_clip("h264", 320, 240, 48, fps=24)
    decoded = {hashlib.sha256(c).hexdigest(): _decoded(c) for c in (short, longer)}
    with_image = {"images": [("jpeg", real_images.bytes("rocket"))], "videos": [("mp4", short)]}
    alone = {"images": [], "videos": [("mp4", longer)]}
    frames = {"images": [], "videos": [("frames", decoded[hashlib.sha256(short).hexdigest()][0])]}
    runs = []
    for family, (video, _) in MODELS.items():
        folder = model_folders.make_qwen_folder(base / family, family, video=video)
        requests = [with_image, alone, *([frames] if family == "qwen2_vl" else [])]
        runs += [{"folder": str(folder), "server": s, "requests": requests} for s in SERVERS]

    def start(work: Path, plugin: str, overlay: Path) -> Any:
        work.mkdir(parents=True)
        job = {"folder": runs[0]["folder"], "runs": runs, "decoded": decoded}
        (work / "job.pkl").write_bytes(pickle.dumps(job))
        script = overlay / "smg_fast" / "testing" / "sglang_runner.py"
        return start_in_venv(sglang_python, ["-c", RUNNER, str(script), str(work)], overlay,
                             {"SMG_FAST_SGLANG": plugin})

    return runs, run_on_and_off(start, base, "SGLang")


def _family(run: dict[str, Any]) -> str:
    return Path(run["folder"]).name


def test_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(sglang_video_runs):
    runs, ((ours, ours_log), (ref, ref_log)) = sglang_video_runs
    for job, run_ours, run_ref in zip(runs, ours["runs"], ref["runs"], strict=True):
        _, cls = MODELS[_family(job)]
        assert run_ours["video_processor"] == f"smg_fast.hf_video.{cls}"
        assert run_ref["video_processor"].startswith("transformers.models.")
        assert run_ref["video_processor"].endswith(f".{cls}")
        assert_same_requests(run_ours["requests"], run_ref["requests"], FIELDS)
        assert run_ours["requests"][0]["fields"]["pixel_values_videos"][0].dtype == np.float32
        config = json.loads((Path(job["folder"]) / "config.json").read_text())
        for request in run_ours["requests"]:
            grid = request["fields"]["video_grid_thw"][-1].reshape(-1)
            assert request["fields"]["pixel_values_videos"][-1].shape[0] == int(np.prod(grid))
            count = request["prompt_token_ids"].count(config["video_token_id"])
            assert count == int(np.prod(grid)) // 4  # merge_size 2
    assert ours["runs"][-1]["smg_fast_video_instances"] >= 1  # smg-fast computed the calls
    assert ref["runs"][-1]["smg_fast_video_instances"] == 0
    assert "computes videos with smg_fast.hf_video.Qwen3VLVideoProcessor (smg-fast " \
        "installed)" in ours_log
    assert "computes videos with transformers." in ref_log and "SMG_FAST_SGLANG=0" in ref_log
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back


def test_sglang_video_options_reached_its_sampling(sglang_video_runs):
    """--mm-process-config's fps 4 keeps more frames of the 12 fps clip than SGLang's default."""
    _, ((ours, _), _) = sglang_video_runs
    for default, faster in (ours["runs"][0:2], ours["runs"][2:4]):
        t_default = int(default["requests"][0]["fields"]["video_grid_thw"][-1].reshape(-1)[0])
        t_faster = int(faster["requests"][0]["fields"]["video_grid_thw"][-1].reshape(-1)[0])
        assert t_faster > t_default, (t_default, t_faster)
