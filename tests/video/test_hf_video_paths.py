"""smg_fast.hf_video computes video paths as transformers' classes decode them: with torchcodec.

Runs in the vLLM venv (tests/video/hf_video_paths_script.py), which has transformers,
torchvision and torchcodec 0.17 (with Debian's FFmpeg shared libraries): transformers' class
decodes the path in ``fetch_videos`` with torchcodec, the drop-in with smg-fast's
``decoder="torchcodec"``; the tensors, grids, sampled indices and metadata must be identical, and
the drop-in must not have handed the call to transformers (the venv lacks PyAV; this
process's PyAV, for the same Python, is put on its path). A 10-bit HEVC clip (where torchcodec's
conversion differs from PyAV's) and a VP9 WebM clip (where torchcodec measures another frame
rate than the header's) and a clip with display rotation (which torchcodec turns upright) are
among the clips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.engine_common import engine_python_or_fail

from smg_fast.testing.engine_env import make_overlay, run_in_venv
from smg_fast.testing.video_clips import make_clip

pytest.importorskip("av")

SCRIPT = Path(__file__).with_name("hf_video_paths_script.py")


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


def test_paths_are_computed_as_transformers_decodes_them(vllm_python, tmp_path):
    clips = {"clip.mp4": make_clip("h264", 98, 62, 16),
             "clip10.mp4": make_clip("hevc", 98, 70, 12, pix_fmt="yuv420p10le",
                                     options={"x265-params": "log-level=error"}),
             "clip.webm": make_clip("vp9", 98, 62, 12),
             "rotated.mp4": make_clip("h264", 98, 62, 12, rotation=90)}
    paths = []
    for name, data in clips.items():
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    overlay = make_overlay(tmp_path / "overlay")
    # The venv has no PyAV, which smg-fast decodes with: this process's (same Python) joins it.
    import av

    site = Path(av.__file__).resolve().parent.parent
    for name in ("av", "av.libs"):
        if (site / name).exists():
            (overlay / name).symlink_to(site / name, target_is_directory=True)
    proc = run_in_venv(vllm_python, [str(SCRIPT), *paths], overlay)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [line for line in result["logged"] if "hands calls" in line], result["logged"]
    assert len(result["cases"]) == 3 * len(paths)
    for case in result["cases"]:
        assert case["indices"][0] == case["indices"][1], case
        assert case["fps"][0] == case["fps"][1] and case["total"][0] == case["total"][1], case
        assert case["same"], {k: case[k] for k in ("path", "cls", "call", "same")}
    # What transformers refuses (pathlib paths, a path of no file), the drop-in refuses alike.
    assert [theirs for theirs, _ in result["refused"]] == ["ValueError", "IndexError",
                                                            "TypeError"], result["refused"]
    for theirs, ours in result["refused"]:
        assert ours == theirs, result["refused"]
