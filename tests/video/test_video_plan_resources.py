"""A video's plan holds no decoder: planning many videos starts no FFmpeg threads, holds no frames.

The server plans every video item of a request before the decode budget admits any of them, so
what a plan holds is outside that budget: a decoder left open by the plan (its threads, its frame
pools) per item would let one request of many small, high-resolution clips hold gigabytes."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from support.decoder_threads import decoder_threads

from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip
from smg_fast.video import DECODERS

pytest.importorskip("av")
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="counts threads through /proc")

CLIP = make_clip("h264", 640, 360, 4)
ROTATED = make_clip("h264", 96, 64, 4, rotation=90)


@pytest.mark.parametrize("decoder", DECODERS)
def test_planned_videos_hold_no_decoder_threads(decoder):
    vp = load_video_processor("qwen2_vl", threads=2, decoder=decoder)
    vp.plan(CLIP, "float32").close()  # whatever a first call starts once
    gc.collect()
    before = decoder_threads()
    plans = [vp.plan(CLIP, "float32") for _ in range(6)]
    try:
        assert decoder_threads() == before
    finally:
        for p in plans:
            p.close()


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_rotated_clip_planned_then_written_is_the_call(decoder):
    vp = load_video_processor("qwen2_vl", threads=2, decoder=decoder)
    want = vp(ROTATED, return_metadata=True)
    planned = vp.plan(ROTATED, "float32")
    assert planned.shape == want["pixel_values_videos"].shape
    assert planned.metadata["rotation"] == want["video_metadata"][0]["rotation"]
    out = np.empty(planned.nbytes // 4, np.float32)
    assert np.array_equal(planned.write_into(out), want["pixel_values_videos"])


def _swapped(monkeypatch, path, swap):
    """Makes the plan's rotation read find path replaced by swap() (a file changed meanwhile)."""
    from smg_fast.video import decode, stream_scan

    read = stream_scan.stream_rotation

    def after_swap(header):
        if not os.path.exists(path + ".swapped"):
            swap(path)
            open(path + ".swapped", "w").close()
        return read(header)

    for module in (decode, stream_scan):  # the plan's read, and the decode's
        monkeypatch.setattr(module, "stream_rotation", after_swap)


def _fifo(path):
    os.unlink(path)
    os.mkfifo(path)


def _other_clip(path):
    with open(path, "wb") as f:  # a video with another stream layout (no stream index 0 alike)
        f.write(make_clip("h264", 48, 32, 2))


@pytest.mark.parametrize("swap", [_fifo, _other_clip])
def test_a_path_replaced_before_the_rotation_read_is_refused(swap, tmp_path, monkeypatch):
    """A path swapped after the open is refused when the rotation read opens it again.

    A FIFO there must not block the read; another video must not lend this one its rotation."""
    import threading

    from smg_fast.errors import InvalidVideoError

    path = str(tmp_path / "clip.mp4")
    with open(path, "wb") as f:
        f.write(ROTATED)
    _swapped(monkeypatch, path, swap)
    vp = load_video_processor("qwen2_vl", threads=2, decoder="torchcodec")
    got: list = []

    def plan():
        try:
            got.append(vp.plan(path, "float32"))
        except Exception as exc:  # noqa: BLE001 (the error is the result)
            got.append(exc)

    worker = threading.Thread(target=plan, daemon=True)
    worker.start()
    worker.join(30)
    if worker.is_alive():  # blocked opening the FIFO: a writer that closes releases it
        with open(path, "wb"):
            pass
        worker.join(30)
        pytest.fail("the rotation read blocked on a FIFO")
    assert isinstance(got[0], InvalidVideoError), got[0]
