"""VideoProcessor.plan: a video's output known from its header, written into a caller's buffer."""

from __future__ import annotations

import numpy as np
import pytest

from smg_fast.errors import InvalidVideoError, UnsupportedCallError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip

CLIP = make_clip("h264", 160, 96, 24, fps=12)


@pytest.mark.parametrize(("family", "options"), [
    ("qwen2_vl", {"do_sample_frames": True, "fps": 2}), ("qwen3_vl", {}),
    ("qwen3_vl", {"num_frames": 5, "fps": None}),
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_plan_writes_what_the_call_returns(family, options, dtype):
    vp = load_video_processor(family)
    ref = vp(CLIP, dtype=dtype, return_metadata=True, **options)
    planned = vp.plan(CLIP, dtype, **options)
    want = ref["pixel_values_videos"]
    assert (planned.nbytes, planned.shape) == (want.nbytes, want.shape)
    assert np.array_equal(planned.grid, ref["video_grid_thw"])
    assert np.array_equal(planned.num_tokens, ref["num_video_tokens"])
    assert planned.metadata["frames_indices"] == ref["video_metadata"][0]["frames_indices"]
    out = np.full(planned.nbytes // want.itemsize + 7, 3, want.dtype)  # larger than needed
    got = planned.write_into(out)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    assert np.shares_memory(got, out) and planned.decode_seconds > 0


def test_a_plan_decodes_nothing_until_written(monkeypatch):
    import smg_fast.processors.video as video

    def refuse(*args, **kwargs):
        raise AssertionError("a frame was decoded")

    monkeypatch.setattr(video, "iter_frames", refuse)
    planned = load_video_processor("qwen2_vl").plan(CLIP)  # every frame: ~29 MiB planned
    assert planned.nbytes > 20 << 20
    planned.close()


def test_a_wrong_destination_is_refused_and_closes_the_plan():
    planned = load_video_processor("qwen3_vl").plan(CLIP)
    with pytest.raises(ValueError, match="dtype"):
        planned.write_into(np.empty(planned.nbytes, np.uint8))
    with pytest.raises(RuntimeError, match="plan the video again"):  # closed by the refusal
        planned.write_into(np.empty(planned.shape, np.float32))


def test_check_stops_the_decoding():
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise TimeoutError("stop")

    planned = load_video_processor("qwen2_vl").plan(CLIP, check=check)
    with pytest.raises(TimeoutError):
        planned.compute()
    assert len(calls) == 3


def test_plans_refuse_what_calls_refuse():
    vp = load_video_processor("qwen2_vl")
    with pytest.raises(InvalidVideoError):
        vp.plan(b"not a video" * 10)
    with pytest.raises(UnsupportedCallError):
        vp.plan(CLIP, return_metadata=True)
    with pytest.raises(TypeError):
        vp.plan(np.zeros((4, 8, 8, 3), np.uint8))
