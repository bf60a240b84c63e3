"""smg_fast.hf_video: transformers' Qwen video processor classes, computed by smg-fast.

The drop-ins subclass transformers' classes, which need torchvision: the comparison runs in the
torchvision venv (hf_video_script.py), on frames decoded there from a clip made here."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tv_oracle import run_with_smg_fast

from smg_fast.testing.video_clips import make_clip

SCRIPT = Path(__file__).with_name("hf_video_script.py")


@pytest.fixture(scope="module")
def tv_refs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf_video")
    clip = folder / "clip.mp4"
    clip.write_bytes(make_clip("h264", 176, 100, 24, fps=12))
    work = folder / "work"
    work.mkdir()
    return run_with_smg_fast(SCRIPT, [str(clip)], work)


def test_drop_ins_equal_transformers_classes(tv_refs):
    assert set(tv_refs) >= {"qwen2-frames", "qwen2-sampled", "qwen2-tensor", "qwen3-defaults",
                            "qwen3-no-meta", "qwen3-num-frames", "qwen3-presampled", "qwen2-uint8",
                            "qwen2-nested-frames", "qwen3-nested", "handed-over", "bytes",
                            "qwen2-three-rows", "qwen2-one-frame"}
    for name, checks in tv_refs.items():
        assert all(checks.values()), (name, checks)


def test_importing_the_module_needs_no_torchvision():
    import smg_fast.hf_video as hv

    assert hv.__all__ == ["Qwen2VLVideoProcessor", "Qwen3VLVideoProcessor", "register"]
    with pytest.raises(AttributeError):
        hv.NoSuchClass  # noqa: B018
