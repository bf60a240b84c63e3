"""Frame indices past a video's end: refused with typed errors, never fewer frames or IndexError.

transformers' PyAV loader drops an index past the stream's end (fewer frames than asked) and its
video processors' frame indexing raises IndexError; smg-fast raises FrameIndexError (an
IndexError and an InvalidVideoError) before decoding, or InvalidVideoError when the stream ends
before a frame its header declares."""

from __future__ import annotations

import numpy as np
import pytest

from smg_fast.errors import FrameIndexError, InvalidVideoError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip, overstating_clip
from smg_fast.video import load_video, open_video
from smg_fast.video.sampling import qwen2

av = pytest.importorskip("av")
CLIP = make_clip("h264", 96, 64, 17, fps=10)


@pytest.mark.parametrize("indices", [[0, 17], [17], [-1, 3], [0, 5, 100]])
def test_indices_outside_the_frames_are_refused(indices):
    with pytest.raises(FrameIndexError, match="outside the video's 17 frames") as info:
        load_video(CLIP, indices=indices)
    assert isinstance(info.value, IndexError) and isinstance(info.value, InvalidVideoError)


def test_the_last_frame_is_in_range():
    frames, meta = load_video(CLIP, indices=[0, 16])
    assert frames.shape[0] == 2 and meta["frames_indices"] == [0, 16]


def test_qwen2_sampling_that_rounds_past_the_end_is_refused_before_decoding(monkeypatch):
    """torch.arange(0, 17, 17 / 14) has 15 entries, the last 17: transformers raises IndexError."""
    assert qwen2(17, num_frames=14, fps=None, video_fps=10.0, temporal=2, min_frames=4,
                 max_frames=768).tolist()[-1] == 17
    from smg_fast.processors import video as video_mod

    monkeypatch.setattr(video_mod, "iter_frames", lambda *a, **k: pytest.fail("decoded"))
    vp = load_video_processor("qwen2_vl", do_sample_frames=True)
    with pytest.raises(FrameIndexError, match="frame index 17 .*num_frames or fps"):
        vp(CLIP, num_frames=14)
    frames = np.zeros((17, 64, 96, 3), np.uint8)
    with pytest.raises(FrameIndexError):
        vp(frames, num_frames=14, video_metadata={"fps": 10.0, "total_num_frames": 17})


def test_frame_metadata_declaring_more_frames_than_given_is_refused():
    frames = np.zeros((6, 64, 96, 3), np.uint8)
    vp = load_video_processor("qwen3_vl")
    with pytest.raises(FrameIndexError, match="outside the video's 6 frames"):
        vp(frames, video_metadata={"fps": 2.0, "total_num_frames": 60})


def test_a_frame_video_without_sampling_counts_its_frames():
    frames = np.zeros((6, 64, 96, 3), np.uint8)
    out = load_video_processor("qwen2_vl")(frames, return_metadata=True,
                                           video_metadata={"total_num_frames": 60})
    assert out["video_grid_thw"][0, 0] == 3
    # the caller's metadata names no indices: None, as transformers 5.24's VideoMetadata has it
    assert out["video_metadata"][0]["frames_indices"] is None


@pytest.fixture(scope="module")
def overstated() -> bytes:
    data = overstating_clip(24, 12)
    header = open_video(0, data)
    try:
        assert header.total_frames == 24  # the header's word
    finally:
        header.close()
    return data


@pytest.mark.parametrize("skip", [True, False])
def test_a_header_that_overstates_its_frames_is_refused_not_shortened(overstated, skip):
    with pytest.raises(InvalidVideoError, match="ends before frame 20 .*declares 24"):
        load_video(overstated, indices=[0, 5, 20], skip=skip)
    frames, _ = load_video(overstated, indices=[0, 5, 11], skip=skip)  # frames it does hold
    assert frames.shape[0] == 3


def test_the_processor_refuses_an_overstating_header(overstated):
    vp = load_video_processor("qwen3_vl")  # 2 fps of 24 frames at 12 fps: 4 frames to 23
    with pytest.raises(InvalidVideoError, match="ends before frame"):
        vp(overstated)
