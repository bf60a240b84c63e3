"""Video items' server limits: the decode budget, the header limits and decoder threads (flags).

A video's decode holds its sampled frames (in the stream's pixel format) until the last is
decoded, the frames the codec keeps for reference and one per frame thread: planned from its
header, checked against a fresh process's peak RSS, and taken from --max-decode-mb as an image's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("av")

import grpc  # noqa: E402
from support.decoder_threads import decoder_threads  # noqa: E402

from smg_fast.client import Client  # noqa: E402
from smg_fast.processors.loader import load_video_processor  # noqa: E402
from smg_fast.testing.video_clips import make_clip  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

BUDGET_MB = 64

_MEASURE_VIDEO = textwrap.dedent("""
    import json, sys
    import numpy as np
    from smg_fast.processors.loader import load_video_processor
    from smg_fast.testing.video_clips import make_clip

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    proc = load_video_processor("qwen2_vl", threads=int(sys.argv[2]) if sys.argv[2] else None)
    data = open(sys.argv[1], "rb").read()
    proc(make_clip("h264", 64, 48, 4, fps=4))  # code and tables paged in, not the big buffers
    planned = proc.plan(data, num_frames=int(sys.argv[3]), do_sample_frames=True,
                        size={"shortest_edge": 3136, "longest_edge": 50176})
    out = np.ones(planned.nbytes // 4, np.float32)  # the destination, touched before measuring
    before = hwm()
    planned.write_into(out)
    print(json.dumps({"planned": planned.decode_bytes, "grew": hwm() - before}))
""")


@pytest.mark.parametrize(("threads", "frames"), [("", 48), ("2", 48), ("", 24)])
def test_planned_video_decode_memory_bounds_the_real_peak(tmp_path, threads, frames):
    """A video's sampled frames, the decoder's references and threads: within its plan."""
    path = tmp_path / "clip.mp4"
    path.write_bytes(make_clip("h264", 1280, 720, 48, fps=24))
    out = subprocess.run([sys.executable, "-c", _MEASURE_VIDEO, str(path), threads, str(frames)],
                         capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout)
    assert got["grew"] <= got["planned"], got
    held = frames * 1280 * 720 * 3 // 2  # the sampled frames alone, in YUV 4:2:0
    assert got["planned"] >= held


def test_a_video_takes_its_decode_memory_from_the_budget(start_server):
    """A video item waits for decode room as an image does, and holds its planned share."""
    clip = make_clip("h264", 320, 240, 16, fps=8)
    want = load_video_processor("qwen2_vl")(clip, num_frames=8,
                                               do_sample_frames=True)["pixel_values_videos"]
    planned = load_video_processor("qwen2_vl").plan(clip, num_frames=8, do_sample_frames=True)
    nbytes = planned.decode_bytes
    planned.close()
    assert nbytes > 8 * 320 * 240 * 3 // 2
    srv = start_server(models=[("q2", "qwen2_vl")], max_decode_mb=BUDGET_MB, decode_wait_s=0.3,
                       pixel_cache_mb=0)
    budget = srv.server.decode
    with Client(srv.target, timeout=120) as c:
        out = c.preprocess(videos=clip, videos_kwargs={"num_frames": 8}, model="q2",
                           transport="inline")
        assert np.array_equal(out.items[0].pixel_values, want)
        assert budget.stats()["peak_bytes"] == nbytes
        assert budget.take(budget.max_bytes)
        try:
            with pytest.raises(grpc.RpcError) as err:
                c.preprocess(videos=clip, videos_kwargs={"num_frames": 8}, model="q2",
                             transport="inline")
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-decode-mb" in err.value.details()
        finally:
            budget.give(budget.max_bytes)
    stats = budget.stats()
    assert stats["bytes"] == 0 and stats["holders"] == 0 and stats["rejected"] == 1


def test_video_flags_set_the_header_limits_and_decoder_threads(start_server):
    """--video-max-* refuse a video from its header; --video-threads decodes the same frames."""
    clip = make_clip("h264", 320, 240, 24, fps=8)  # 3 s, 76800-pixel frames
    want = load_video_processor("qwen2_vl")(clip, fps=2, do_sample_frames=True)
    srv = start_server(models=[("q2", "qwen2_vl")], video_max_seconds=2.0, pixel_cache_mb=0)
    with Client(srv.target, timeout=120) as c:
        with pytest.raises(grpc.RpcError) as err:
            c.preprocess(videos=clip, videos_kwargs={"fps": 2}, model="q2", transport="inline")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "over the limit of 2 s" in err.value.details()
    assert srv.server.decode.stats()["peak_bytes"] == 0  # refused before anything was decoded
    srv = start_server(models=[("q2", "qwen2_vl")], video_max_frame_pixels=320 * 240 - 1)
    with Client(srv.target, timeout=120) as c:
        with pytest.raises(grpc.RpcError) as err:
            c.preprocess(videos=clip, videos_kwargs={"fps": 2}, model="q2", transport="inline")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "320x240 frames are over the limit" in err.value.details()
    srv = start_server(models=[("q2", "qwen2_vl")], video_threads=2, video_max_frames=24)
    with Client(srv.target, timeout=120) as c:
        out = c.preprocess(videos=clip, videos_kwargs={"fps": 2}, model="q2", transport="inline")
        assert np.array_equal(out.items[0].pixel_values, want["pixel_values_videos"])


@pytest.mark.parametrize(("flag", "value"), [("--video-max-seconds", "0"),
                                             ("--video-max-frames", "0"),
                                             ("--video-max-frame-pixels", "0"),
                                             ("--video-threads", "-2")])
def test_video_flags_are_checked(flag, value):
    from smg_fast.server.flags import config_from_args

    with pytest.raises(SystemExit):  # argparse's error: the message names the flag
        config_from_args([flag, value], environ={})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads through /proc")
@pytest.mark.parametrize("decoder", ["torchcodec", "opencv"])
def test_video_items_waiting_for_decode_room_hold_no_decoders(start_server, decoder):
    """Video items waiting for the decode budget hold no FFmpeg decoder threads.

    A request's items are all planned before the budget admits the first; their plans (the
    rotation read included) leave no decoder open."""
    import threading
    import time

    clip = make_clip("h264", 320, 240, 4, fps=4)
    opts = {"num_frames": 2, "decoder": decoder}
    want = load_video_processor("qwen2_vl")(clip, do_sample_frames=True,
                                            **opts)["pixel_values_videos"]
    srv = start_server(models=[("q2", "qwen2_vl")], max_decode_mb=BUDGET_MB, decode_wait_s=60,
                       pixel_cache_mb=0, video_threads=2)
    budget = srv.server.decode
    with Client(srv.target, timeout=120) as c:
        c.preprocess(videos=clip, videos_kwargs=opts, model="q2", transport="inline")  # warm
        before = decoder_threads()
        assert budget.take(budget.max_bytes)
        got: dict = {}

        def send() -> None:
            got["out"] = c.preprocess(videos=[clip] * 12, videos_kwargs=opts, model="q2",
                                      transport="inline")

        sender = threading.Thread(target=send)
        sender.start()
        try:
            end = time.monotonic() + 60
            while budget.stats()["waiting"] == 0 and time.monotonic() < end:
                time.sleep(0.02)
            assert budget.stats()["waiting"] == 1  # every item planned, the first waiting
            held = decoder_threads() - before
        finally:
            budget.give(budget.max_bytes)
            sender.join(120)
    assert held == 0, held  # 12 planned items, none holding a decoder's threads
    assert len(got["out"].items) == 12
    assert all(np.array_equal(it.pixel_values, want) for it in got["out"].items)
