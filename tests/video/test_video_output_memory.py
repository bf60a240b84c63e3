"""Video outputs come from the scratch pool: a dropped one's memory serves the next call."""

from __future__ import annotations

import numpy as np
import pytest

import smg_fast
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip

pytest.importorskip("av")

CLIP = make_clip("h264", 160, 96, 16, fps=8)
OTHER = make_clip("h264", 160, 96, 16, fps=8, picture=np.full((200, 300, 3), 90, np.uint8))


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("planned", [False, True])
def test_a_dropped_output_lends_its_memory_and_a_kept_one_never_changes(planned):
    """Outputs the caller keeps stay intact while later calls run; dropped ones are reused."""
    vp = load_video_processor("qwen2_vl", do_sample_frames=True, fps=4)

    def run(video: bytes) -> np.ndarray:
        if planned:
            return vp.plan(video).compute().reshape(-1, 1176)
        return vp(video)["pixel_values_videos"]

    want = run(CLIP).copy()
    kept = run(CLIP)
    for _ in range(3):
        run(OTHER)  # same size: served from the pool, never from kept's memory
    assert np.array_equal(kept, want)
    kept[:] = 0  # the caller's own array
    assert np.array_equal(run(CLIP), want)

    address = _address(run(OTHER))  # dropped at once
    before = smg_fast.scratch_stats()
    again = run(CLIP)
    after = smg_fast.scratch_stats()
    assert _address(again) == address
    assert after["live_bytes"] - before["live_bytes"] >= again.nbytes  # a pooled block, held
    assert np.array_equal(again, want)


def test_an_output_over_the_pool_cap_is_a_plain_array(monkeypatch):
    """An output larger than the per-thread pool cap is not pooled (nothing retains it)."""
    from smg_fast.processors import video as video_mod

    vp = load_video_processor("qwen2_vl", do_sample_frames=True, fps=4)
    pooled = vp(CLIP)["pixel_values_videos"]
    real = video_mod._native.scratch_stats
    monkeypatch.setattr(video_mod._native, "scratch_stats", lambda: {**real(), "cap_bytes": 1024})
    before = smg_fast.scratch_stats()["live_bytes"]
    out = vp(CLIP)["pixel_values_videos"]
    assert smg_fast.scratch_stats()["live_bytes"] - before < out.nbytes
    assert np.array_equal(out, pooled)
