"""Decoding IDR-started groups of a stream on several threads: the frames of a sequential decode.

Clips with closed GOPs (an IDR every 12 frames, B-frames, B-pyramids) are encoded here with
PyAV; transformers' ``load_video(..., backend="pyav")`` (one sequential PyAV decode) is the
reference. Open GOPs (H.264 recovery points, HEVC CRA pictures) have no boundary a fresh decoder
may start at: those are decoded sequentially, with the same frames."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from smg_fast.testing.video_clips import codecs_available, make_clip
from smg_fast.video import load_video, open_video
from smg_fast.video import parallel_decode as pd

av = pytest.importorskip("av")  # a test dependency: never missing in CI
ENCODABLE = codecs_available()

CLOSED = {
    "h264": {"x264-params": "keyint=12:min-keyint=12:scenecut=0"},
    "h264-pyramid": {"x264-params": "keyint=9:min-keyint=3:bframes=3:b-pyramid=normal"},
    "hevc": {"x265-params": "keyint=12:min-keyint=12:scenecut=0:open-gop=0:log-level=none"},
}
OPEN = {
    "h264": {"x264-params": "keyint=12:min-keyint=12:scenecut=0:open-gop=1"},
    "hevc": {"x265-params": "keyint=12:min-keyint=12:log-level=none"},
}


def _clip(kind: str, gops: dict, frames: int = 60) -> bytes:
    codec = kind.split("-")[0]
    if codec not in ENCODABLE:
        pytest.skip(f"this PyAV build has no {codec} encoder")
    return make_clip(codec, 160, 96, frames, fps=12, options=gops[kind])


def _reference(tmp_path, data: bytes, indices: list[int]) -> np.ndarray:
    from transformers.video_utils import load_video as hf_load_video

    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    frames, _ = hf_load_video(str(path), backend="pyav",
                              sample_indices_fn=lambda metadata, **kw: np.array(indices))
    return frames


@pytest.fixture
def runs(monkeypatch) -> list[list[tuple[int, int]]]:
    """The runs parallel decoding cut (one list of groups per decoder), as it decodes them."""
    seen: list[list[tuple[int, int]]] = []
    real = pd._decode_run

    def spy(header, plan, run, wanted, check, *sizes):
        seen.append(list(run))
        return real(header, plan, run, wanted, check, *sizes)

    monkeypatch.setattr(pd, "_decode_run", spy)
    return seen


@pytest.mark.parametrize("kind", sorted(CLOSED))
@pytest.mark.parametrize("indices", [list(range(60)), list(range(0, 60, 5)), [3, 30, 59],
                                     [0, 1, 2, 40, 41], [11, 12, 13]])
@pytest.mark.parametrize("threads", [2, 3])
def test_groups_on_threads_give_the_loaders_frames(tmp_path, runs, kind, indices, threads):
    data = _clip(kind, CLOSED)
    got, _ = load_video(data, indices=indices, threads=threads)
    assert np.array_equal(got, _reference(tmp_path, data, indices))
    with _Open(data) as header:  # the IDR groups holding wanted frames
        plan = pd.plan_packets(header)
    frame_pts = sorted(plan.rank)
    groups = {max(s for s in plan.starts if s <= plan.position[frame_pts[i]]) for i in indices}
    assert len(groups) >= 2 or runs == []  # one group: decoded sequentially
    if len(groups) >= 2:  # decoded in parallel runs, each a decoder of its own
        assert 2 <= len(runs) <= min(threads, len(groups))
    starts = [start for run in sorted(runs) for start, _ in run]
    assert starts == sorted(set(starts))  # each group once, runs contiguous


def test_groups_without_a_wanted_frame_are_not_decoded(tmp_path, runs):
    data = _clip("h264", CLOSED)
    got, _ = load_video(data, indices=[3, 50], threads=2)
    assert np.array_equal(got, _reference(tmp_path, data, [3, 50]))
    assert [start for run in sorted(runs) for start, _ in run] == [0, 48]  # 12..47 skipped


@pytest.mark.parametrize("kind", sorted(OPEN))
def test_open_gops_decode_sequentially_with_the_same_frames(tmp_path, runs, kind):
    data = _clip(kind, OPEN)
    indices = list(range(0, 60, 4))
    with _Open(data) as header:
        plan = pd.plan_packets(header)
        assert plan is not None and plan.starts == [0]  # no IDR but the first
    got, _ = load_video(data, indices=indices, threads=2)
    assert np.array_equal(got, _reference(tmp_path, data, indices))
    assert runs == []


def test_a_file_path_is_opened_again_for_each_run(tmp_path, runs):
    data = _clip("h264", CLOSED)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    indices = list(range(0, 60, 6))
    got, _ = load_video(str(path), indices=indices, threads=2)
    assert np.array_equal(got, _reference(tmp_path, data, indices))
    assert len(runs) == 2


def test_a_check_that_raises_in_one_run_stops_every_run():
    """A deadline or cancellation raised on any thread reaches the caller; no thread is left."""
    data = _clip("h264", CLOSED)
    before = threading.active_count()
    calls = []

    def check():
        calls.append(threading.current_thread().name)
        if len(calls) == 20:
            raise TimeoutError("deadline")

    with _Open(data) as header:
        with pytest.raises(TimeoutError, match="deadline"):
            pd.decode_parallel(header, list(range(60)), 2, check)
    assert threading.active_count() == before
    assert len(calls) < 60 + 2  # stopped early, not after decoding everything


def test_a_thread_that_cannot_start_stops_the_runs_already_started(monkeypatch):
    """A failed thread start is raised once the runs started before it have stopped."""
    data = _clip("h264", CLOSED)
    real_run, left = pd._decode_run, threading.Event()

    def run(header, plan, groups, wanted, check, *sizes):
        if threading.current_thread() is threading.main_thread():
            return real_run(header, plan, groups, wanted, check, *sizes)
        try:  # a run on its own thread: decodes until told to stop (at most 20 s)
            for _ in range(2000):
                check()
                threading.Event().wait(0.01)
            left.set()
        except pd._Stopped:
            raise
        return None

    started = []
    real_start = threading.Thread.start

    def start(thread):
        if thread.name.startswith("smg-fast-gop-") and started:
            raise RuntimeError("can't start new thread")
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(pd, "_decode_run", run)
    monkeypatch.setattr(threading.Thread, "start", start)
    with _Open(data) as header:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            pd.decode_parallel(header, list(range(60)), 4)
    assert len(started) == 1
    assert not started[0].is_alive()  # stopped and joined before the error was raised
    assert not left.is_set()


class _Open:
    """open_video as a context manager."""

    def __init__(self, data: bytes) -> None:
        self.header = open_video(0, data)

    def __enter__(self):
        return self.header

    def __exit__(self, *exc) -> None:
        self.header.close()
