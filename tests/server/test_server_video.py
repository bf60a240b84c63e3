"""Video items through the service: exact to the library on every transport, cached, admitted.

Real encoded clips (made here with PyAV), a real server on 127.0.0.1. The library's video
processor is proven exact to transformers' in tests/video; tests/video/test_video_served.py
compares a served video with transformers' class directly."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("av")

import grpc  # noqa: E402

from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.client import Client, build_request  # noqa: E402
from smg_fast.processors.loader import load_video_processor  # noqa: E402
from smg_fast.testing.video_clips import make_clip  # noqa: E402

CLIP = make_clip("h264", 160, 96, 24, fps=12)
CLIP_B = make_clip("h264", 128, 72, 10, fps=5)
MODELS = [("q2", "qwen2_vl"), ("q3", "qwen3_vl"), ("kimi", "kimi_k25")]

pytestmark = pytest.mark.usefixtures("no_shm_leak")


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    (d / "clip.mp4").write_bytes(CLIP)
    return d


def server_fields(media_dir) -> dict:
    """The module's `server`: Qwen2-VL, Qwen3-VL and Kimi, a pixel cache, media_dir allowed."""
    return dict(models=MODELS, pixel_cache_mb=64, allowed_media_dirs=[str(media_dir)])


def _library(family: str, video, dtype: str = "float32", **options) -> dict:
    return load_video_processor(family)(video, dtype=dtype, return_metadata=True, **options)


def _same_as_library(item, ref: dict, k: int = 0) -> None:
    grid = ref["video_grid_thw"]
    rows = [int(g[0] * g[1] * g[2]) for g in grid]
    at = sum(rows[:k])
    want = ref["pixel_values_videos"][at:at + rows[k]]
    assert item.pixel_values.dtype == want.dtype
    assert np.array_equal(item.pixel_values.view(np.uint8), want.view(np.uint8))
    assert item.grid_thw == tuple(int(v) for v in grid[k])
    assert item.num_tokens == int(ref["num_video_tokens"][k])
    meta = ref["video_metadata"][k]
    assert item.video["frames_indices"] == list(meta["frames_indices"])
    assert item.video["fps"] == meta["fps"]
    assert item.video["total_num_frames"] == meta["total_num_frames"]
    assert (item.video["width"], item.video["height"]) == (meta["width"], meta["height"])


@pytest.mark.parametrize("transport", ["inline", "shm"])
@pytest.mark.parametrize(("model", "family", "kwargs"), [
    ("q2", "qwen2_vl", {}),
    ("q2", "qwen2_vl", {"fps": 2}),
    ("q3", "qwen3_vl", {}),
    ("q3", "qwen3_vl", {"num_frames": 6}),
])
def test_served_video_equals_the_library(client, transport, model, family, kwargs):
    out = client.preprocess(videos=CLIP, videos_kwargs=kwargs, model=model,
                            transport=transport)
    item = out.items[0]
    assert item.transport == transport
    options = dict(kwargs)
    if kwargs:  # fps or num_frames alone: sampling on, the other cleared (VideoOptions' rule)
        options.update(do_sample_frames=True, fps=kwargs.get("fps"),
                       num_frames=kwargs.get("num_frames"))
    _same_as_library(item, _library(family, CLIP, **options))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_other_dtypes_equal_the_library(client, dtype):
    out = client.preprocess(videos=CLIP, model="q3", dtype=dtype, transport="inline")
    _same_as_library(out.items[0], _library("qwen3_vl", CLIP, dtype))


def test_images_and_videos_in_one_request_keep_their_order(client, small_jpegs):
    import smg_fast
    from smg_fast.client import read_response

    opts = pb.VideoOptions(fps=2)
    req = build_request(model="q2", transport="inline")
    req.items.extend([pb.MediaItem(data=small_jpegs["rocket"]), pb.MediaItem(data=CLIP, video=opts),
                      pb.MediaItem(data=small_jpegs["chelsea"]),
                      pb.MediaItem(data=CLIP_B, video=opts)])
    out = read_response(client._stub.Preprocess(req, timeout=60))
    assert [it.video is not None for it in out.items] == [False, True, False, True]
    images = smg_fast.load_processor("qwen2_vl")([small_jpegs["rocket"], small_jpegs["chelsea"]])
    assert np.array_equal(out.pixel_values, images["pixel_values"])
    assert np.array_equal(out.image_grid_thw, images["image_grid_thw"])
    ref = _library("qwen2_vl", [CLIP, CLIP_B], do_sample_frames=True, fps=2, num_frames=None)
    assert np.array_equal(out.pixel_values_videos, ref["pixel_values_videos"])
    assert np.array_equal(out.video_grid_thw, ref["video_grid_thw"])
    assert [m["frames_indices"] for m in out.video_metadata] == [
        list(m["frames_indices"]) for m in ref["video_metadata"]]


def test_a_file_url_under_the_allowed_dir_is_the_bytes(client, media_dir):
    by_url = client.preprocess(videos=f"file://{media_dir}/clip.mp4", model="q3",
                               transport="inline")
    by_bytes = client.preprocess(videos=CLIP, model="q3", transport="inline")
    assert np.array_equal(by_url.pixel_values_videos, by_bytes.pixel_values_videos)
    assert by_url.items[0].content_hash == by_bytes.items[0].content_hash
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(videos="file:///etc/hostname", model="q3", transport="inline")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "outside the allowed media directories" in err.value.details()


def test_the_cache_keys_content_and_sampling(server, client):
    clip = make_clip("h264", 96, 64, 16, fps=8)  # this test's own content
    first = client.preprocess(videos=clip, model="q2", videos_kwargs={"fps": 2},
                              transport="inline")
    again = client.preprocess(videos=clip, model="q2", videos_kwargs={"fps": 2},
                              transport="shm")
    other = client.preprocess(videos=clip, model="q2", videos_kwargs={"fps": 4},
                              transport="inline")
    assert not first.items[0].cache_hit and again.items[0].cache_hit
    assert np.array_equal(first.pixel_values_videos, again.pixel_values_videos)
    assert again.items[0].video == first.items[0].video
    assert not other.items[0].cache_hit  # other sampling: another entry, another output
    assert other.video_grid_thw[0, 0] != first.video_grid_thw[0, 0]
    _same_as_library(other.items[0], _library("qwen2_vl", clip, do_sample_frames=True, fps=4,
                                              num_frames=None))
    as_q3 = client.preprocess(videos=clip, model="q3", transport="inline")
    assert not as_q3.items[0].cache_hit  # another model's video config: another entry


def test_model_info_says_which_models_take_videos(client):
    info = {m["name"]: m["takes_video"] for m in client.model_info()["models"]}
    assert info == {"q2": True, "q3": True, "kimi": False}


# ---- refusals: typed, before decoding, nothing left behind ----

def _refused(client, *, model="q2", video=CLIP, options=None, **kw):
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(videos=video, model=model, videos_kwargs=options, **kw)
    return err.value.code(), err.value.details()


@pytest.mark.parametrize(("video", "options", "match"), [
    (b"\x00\x01not a video" * 50, None, "not a readable video container"),
    (CLIP[:len(CLIP) // 3], None, "item 0: "),
    (None, {"fps": 2, "num_frames": 4}, "mutually exclusive"),
    (None, {"fps": -1.0}, "fps must be a positive number"),
    (None, {"num_frames": 40}, "item 0: "),
    (None, {"max_pixels": 10**12}, "never widen|max_pixels <="),
    (None, {"min_frames": 9, "max_frames": 3}, "min_frames <= max_frames"),
])
def test_bad_videos_and_options_are_invalid_argument(client, video, options, match):
    code, details = _refused(client, video=CLIP if video is None else video, options=options,
                             transport="shm")
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("item 0: ")
    assert re.search(match, details), details


def test_a_huge_num_frames_is_invalid_argument_before_anything_is_listed(client):
    """Qwen3-VL's rule repeats frames up to num_frames: 2^32 - 1 of them is refused, not listed."""
    code, details = _refused(client, model="q3", options={"num_frames": 2**32 - 1},
                             transport="inline")
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("item 0: num_frames=4294967295 is over the limit"), details


def test_an_image_sent_as_a_video_is_refused(client, small_jpegs):
    code, details = _refused(client, video=small_jpegs["rocket"])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details


def test_a_model_without_videos_refuses_them(client):
    code, details = _refused(client, model="kimi")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "takes no videos" in details


def test_the_compact_format_is_for_images(client):
    code, details = _refused(client, encoding="uint8+lut")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "for images" in details


def test_an_item_names_its_own_index(client, small_jpegs):
    req = build_request([small_jpegs["rocket"]], model="q2", transport="inline",
                        videos=[b"junk" * 100])
    with pytest.raises(grpc.RpcError) as err:
        client._stub.Preprocess(req, timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("item 1: ")


# ---- admission: the output is planned from the header, before decoding ----

@pytest.fixture
def no_decoding(monkeypatch):
    """Fails any frame decode in this process (the server runs in it)."""
    import smg_fast.processors.video as video

    def refuse(*args, **kwargs):
        raise AssertionError("a frame was decoded")

    monkeypatch.setattr(video, "iter_frames", refuse)


def test_an_output_over_max_output_mb_is_refused_before_decoding(start_server, no_decoding):
    # Qwen2-VL without sampling keeps every frame: 24 frames of 160x96 resized to 420x252 are
    # 12 temporal groups of 540 rows of 4704 bytes (float32), about 29 MiB; the limit is 1 MiB.
    srv = start_server(models=[("q2", "qwen2_vl")], max_output_mb=1)
    with Client(srv.target, timeout=60) as c:
        code, details = _refused(c, transport="shm")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "--max-output-mb" in details and details.startswith("item 0: ")


def test_a_video_too_large_to_go_inline_is_refused_before_decoding(start_server, no_decoding):
    srv = start_server(models=[("q2", "qwen2_vl")], max_message_mb=1)
    with Client(srv.target, timeout=60) as c:
        code, details = _refused(c, transport="inline")
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "message limit" in details


def test_a_video_too_large_to_go_inline_goes_by_shm(start_server):
    srv = start_server(models=[("q2", "qwen2_vl")], max_message_mb=1)
    with Client(srv.target, timeout=60) as c:
        out = c.preprocess(videos=CLIP, model="q2", transport="auto")
    assert out.items[0].transport == "shm"
    assert out.items[0].pixel_values.nbytes > 1 << 20
    _same_as_library(out.items[0], _library("qwen2_vl", CLIP))


# ---- deadlines and cancellation stop the decoding between frames ----

class _CountingTicket:
    """A Ticket that stops the work after `after` checks, counting them."""

    def __init__(self, after: int) -> None:
        from smg_fast.server.ticket import Ticket

        self._ticket = Ticket()
        self.after = after
        self.checks = 0

    def __getattr__(self, name):
        return getattr(self._ticket, name)

    def check(self) -> None:
        self.checks += 1
        if self.checks >= self.after:
            self._ticket.stop(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline (test)")
        self._ticket.check()


def test_a_deadline_stops_the_decoding_mid_video(server):
    import time

    service = server.server.service
    long_clip = make_clip("h264", 96, 64, 48, fps=12)
    raw = build_request(videos=long_clip, model="q2", transport="inline").SerializeToString()
    ticket = _CountingTicket(after=8)
    from smg_fast.server.request_error import RequestError

    with pytest.raises(RequestError) as err:
        service.preprocess(raw, time.perf_counter(), ticket=ticket)
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    # 1 check before the request, 1 per item, then one per frame or packet until the stop: far
    # fewer than the 48 frames the video would decode.
    assert ticket.checks == 8


def test_a_client_deadline_leaves_nothing_behind(server):
    # ~240 frames of 640x480 to decode and process: seconds of work against a 0.1 s deadline
    long_clip = make_clip("h264", 640, 480, 240, fps=24)
    with Client(server.target) as c:
        with pytest.raises(grpc.RpcError) as err:
            c.preprocess(videos=long_clip, model="q2", transport="shm", timeout=0.1,
                         videos_kwargs={"fps": 24})
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # the server is still healthy and serves the next request
        out = c.preprocess(videos=CLIP_B, model="q2", transport="shm", timeout=60)
    _same_as_library(out.items[0], _library("qwen2_vl", CLIP_B))


# ---- the clients ----

def test_the_cli_sends_and_verifies_a_video(server, tmp_path, capsys):
    from smg_fast.client import main

    path = tmp_path / "clip.mp4"
    path.write_bytes(CLIP)
    rc = main(["--target", server.target, "--model", "q3", "--video", str(path), "--fps", "3",
               "--verify", "--transport", "shm"])
    out = capsys.readouterr().out
    assert rc == 0, out
    ref = _library("qwen3_vl", CLIP, fps=3, num_frames=None, do_sample_frames=True)
    assert f"frames {list(ref['video_metadata'][0]['frames_indices'])}" in out
    assert "pixel_values_videos" in out and "identical to in-process (video)" in out


def test_verify_tells_a_different_video_apart(client):
    from smg_fast.client import _verify_video

    info = client.model_info()
    out = client.preprocess(videos=CLIP, model="q3", videos_kwargs={"fps": 3})
    item = out.items[0]
    same = _verify_video(info, "q3", CLIP, "float32", {"fps": 3, "num_frames": None},
                         item.pixel_values, item.video)
    other = _verify_video(info, "q3", CLIP, "float32", {"fps": 4, "num_frames": None},
                          item.pixel_values, item.video)
    assert same.startswith("identical") and other.startswith("DIFFERS")


def test_the_async_client_takes_videos(server):
    import asyncio

    from smg_fast.client import AsyncClient

    async def run():
        async with AsyncClient(server.target, timeout=60) as c:
            return await c.preprocess(videos=[CLIP_B], model="q2", transport="shm",
                                      videos_kwargs={"num_frames": 4})

    out = asyncio.run(run())
    _same_as_library(out.items[0], _library("qwen2_vl", CLIP_B, do_sample_frames=True,
                                            num_frames=4, fps=None))


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_a_stream_shorter_than_its_header_fails_mid_write_leaving_nothing(start_server,
                                                                          transport):
    """Decoded while written (no cache): the error comes from the write, its segment goes."""
    from smg_fast.testing.video_clips import overstating_clip

    clip = overstating_clip(24, 10)
    srv = start_server(models=[("q2", "qwen2_vl")])  # no pixel cache: written in place
    with Client(srv.target, timeout=60) as c:
        code, details = _refused(c, video=clip, transport=transport)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert details.startswith("item 0: ") and "ends before frame" in details
        assert srv.server.registry.stats()["outstanding"] == 0  # its segment was unlinked
        out = c.preprocess(videos=CLIP_B, model="q2", transport=transport)  # still serving
    _same_as_library(out.items[0], _library("qwen2_vl", CLIP_B))


@pytest.mark.parametrize("kwargs", [{}, {"num_frames": 5}, {"fps": 1.5}])
def test_timestamps_are_qwen3_processors(client, kwargs):
    """The seconds before each temporal group, as transformers' Qwen3VLProcessor computes them."""
    proc = pytest.importorskip("transformers.models.qwen3_vl.processing_qwen3_vl")
    out = client.preprocess(videos=CLIP, model="q3", videos_kwargs=kwargs, transport="inline")
    meta = out.items[0].video
    want = proc.Qwen3VLProcessor._calculate_timestamps(None, list(meta["frames_indices"]),
                                                       meta["fps"], 2)
    assert meta["timestamps"] == want
    assert len(want) == out.items[0].grid_thw[0]
