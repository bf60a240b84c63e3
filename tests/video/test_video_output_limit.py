"""max_output_bytes: a video call's output is planned from its headers, refused before decoding."""

from __future__ import annotations

import numpy as np
import pytest

import smg_fast
from smg_fast.errors import InvalidVideoError, OutputTooLargeError
from smg_fast.processors import video as video_mod
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip

CLIP = make_clip("h264", 96, 64, 8, fps=8)


@pytest.fixture
def no_decoding(monkeypatch) -> None:
    """Fails the test if any video's frames are decoded."""
    def refuse(header, *args, **kwargs):
        raise AssertionError(f"video {header.index} was decoded")

    monkeypatch.setattr(video_mod, "iter_frames", refuse)


def _planned_bytes(vp, video, itemsize: int = 4) -> int:
    """The output bytes of vp on video, from its header alone."""
    source = video_mod._open_item(0, video, vp.limits)
    try:
        return video_mod._plan(0, vp.config, source)[1].elems * itemsize
    finally:
        source.close()


def test_the_default_limit_is_4_gib_and_refuses_before_decoding(no_decoding):
    """A Qwen2-VL call keeps every frame; a 64 Mpx pixel floor makes 8 frames 6.4 GB."""
    assert video_mod.MAX_OUTPUT_BYTES == 4 << 30
    vp = load_video_processor("qwen2_vl", min_pixels=8192 * 8192, max_pixels=8192 * 8192)
    with pytest.raises(OutputTooLargeError) as info:
        vp(CLIP)
    assert info.value.limit == 4 << 30 and info.value.nbytes > 4 << 30
    assert str(info.value).startswith("video 0: the output would be ")
    assert "max_output_bytes=" in str(info.value) and str(4 << 30) in str(info.value)
    assert isinstance(info.value, InvalidVideoError)  # what a video caller catches


def test_a_batch_is_refused_whole_naming_the_video_that_crosses(no_decoding):
    """Not even the first video, which fits, is decoded."""
    vp = load_video_processor("qwen2_vl")
    one = _planned_bytes(vp, CLIP)
    with pytest.raises(OutputTooLargeError) as info:
        vp([CLIP, CLIP, CLIP], max_output_bytes=2 * one - 1)
    assert info.value.index == 1 and info.value.nbytes == 3 * one


def test_the_limit_is_inclusive():
    vp = load_video_processor("qwen3_vl")
    size = _planned_bytes(vp, CLIP)
    assert vp(CLIP, max_output_bytes=size)["pixel_values_videos"].nbytes == size
    with pytest.raises(OutputTooLargeError):
        vp(CLIP, max_output_bytes=size - 1)


def test_the_limit_counts_the_dtype():
    vp = load_video_processor("qwen3_vl")
    size = _planned_bytes(vp, CLIP)
    out = vp(CLIP, dtype="bfloat16", max_output_bytes=size // 2)
    assert out["pixel_values_videos"].nbytes == size // 2


def test_frame_videos_are_limited_too():
    frames = np.zeros((4, 64, 96, 3), np.uint8)
    with pytest.raises(OutputTooLargeError, match="video 0"):
        load_video_processor("qwen2_vl")(frames, max_output_bytes=1000)


def test_a_negative_limit_is_refused():
    with pytest.raises(ValueError, match="max_output_bytes"):
        load_video_processor("qwen2_vl")(CLIP, max_output_bytes=-1)


def test_the_limit_reaches_the_video_processor_through_proc():
    proc = smg_fast.load_processor("qwen2_vl")
    with pytest.raises(OutputTooLargeError):
        proc(videos=CLIP, videos_kwargs={"max_output_bytes": 1000})


def test_a_batch_is_written_into_one_buffer():
    vp = load_video_processor("qwen3_vl")
    both = vp([CLIP, CLIP])["pixel_values_videos"]
    one = vp(CLIP)["pixel_values_videos"]
    assert both.flags.c_contiguous and both.base is not None
    assert np.array_equal(both, np.concatenate([one, one]))


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_a_huge_num_frames_is_refused_before_its_indices_are_listed(family, no_decoding):
    """A num_frames past the declared-frames limit is refused before any index is listed.

    Qwen3-VL repeats frames up to num_frames (transformers' unclamped np.linspace): 8 GB here."""
    import tracemalloc

    vp = load_video_processor(family)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidVideoError, match="num_frames") as info:
            vp.plan(CLIP, num_frames=10**9, do_sample_frames=True, fps=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.index == 0 and peak < 1 << 24
    with pytest.raises(InvalidVideoError, match="num_frames"):
        vp(CLIP, num_frames=vp.limits.max_frames + 1, do_sample_frames=True, fps=None)
