"""A video item's ``VideoOptions.decoder`` picks whose frames the service serves.

The decoders' own equality with torchcodec and OpenCV is proven in test_video_decoders.py on
the library; here the served tensor (pixel cache on, inline and shm) equals the library's for the
same decoder, the three decoders' tensors differ on a 10-bit clip (where their conversions part),
so a cached output never answers another decoder's request, and an unknown name is refused."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from smg_fast.client import Client
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip
from smg_fast.video import DECODERS

pytest.importorskip("av")

CLIP = make_clip("hevc", 98, 70, 12, pix_fmt="yuv420p10le",
                 options={"x265-params": "log-level=error"})
KWARGS = {"fps": 8}


@pytest.fixture(scope="module")
def served(start_server):
    """A Qwen2-VL server with the pixel cache on, on 127.0.0.1."""
    return start_server(models=[("q2", "qwen2_vl")], pixel_cache_mb=64)


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_each_decoder_is_served_as_the_library_computes_it(served, transport):
    vp = load_video_processor("qwen2_vl")
    got = {}
    with Client(served.target, timeout=60) as c:
        for decoder in (*DECODERS, "pyav"):  # pyav twice: a cache hit after the others
            out = c.preprocess(videos=CLIP, videos_kwargs={**KWARGS, "decoder": decoder},
                               model="q2", transport=transport)
            want = vp(CLIP, decoder=decoder, do_sample_frames=True, **KWARGS)
            item = out.items[0]
            assert np.array_equal(item.pixel_values, want["pixel_values_videos"]), decoder
            assert np.array_equal(out.video_grid_thw, want["video_grid_thw"])
            got[decoder] = item.pixel_values
    for a in DECODERS:
        for b in DECODERS:
            if a < b:
                assert not np.array_equal(got[a], got[b]), (a, b)


def test_an_unknown_decoder_is_invalid_argument(served):
    with Client(served.target, timeout=60) as c:
        with pytest.raises(grpc.RpcError) as info:
            c.preprocess(videos=CLIP, videos_kwargs={"decoder": "decord"}, model="q2")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "decord" in info.value.details()


def test_the_cli_verifies_a_decoder_choice(served, tmp_path, capsys):
    """``--decoder`` reaches the server; --verify decodes as the response says it was."""
    from smg_fast.client import _verify_video, main

    path = tmp_path / "clip.mp4"
    path.write_bytes(CLIP)
    rc = main(["--target", served.target, "--model", "q2", "--video", str(path), "--fps", "8",
               "--decoder", "opencv", "--verify", "--transport", "inline"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "identical to in-process (video)" in out
    with Client(served.target, timeout=60) as c:
        info = c.model_info()
        item = c.preprocess(videos=CLIP, videos_kwargs={**KWARGS, "decoder": "opencv"},
                            model="q2").items[0]
    options = {"fps": 8, "num_frames": None, "do_sample_frames": True}
    assert item.video["decoder"] == "opencv"
    follows = _verify_video(info, "q2", CLIP, "float32", options, item.pixel_values, item.video)
    as_pyav = _verify_video(info, "q2", CLIP, "float32", options, item.pixel_values,
                            {**item.video, "decoder": "pyav"})
    assert follows.startswith("identical") and as_pyav.startswith("DIFFERS")


def test_the_server_default_decoder_and_its_override(start_server, tmp_path, capsys):
    """--video-decoder sets whose frames an item gets unless the item names a decoder.

    The response says whose frames they are, and --verify checks against that decoder."""
    from smg_fast.client import main

    srv = start_server(models=[("q2", "qwen2_vl")], video_decoder="opencv")
    vp = load_video_processor("qwen2_vl")
    with Client(srv.target, timeout=60) as c:
        default = c.preprocess(videos=CLIP, videos_kwargs=KWARGS, model="q2").items[0]
        named = c.preprocess(videos=CLIP, videos_kwargs={**KWARGS, "decoder": "pyav"},
                             model="q2").items[0]
    for item, decoder in ((default, "opencv"), (named, "pyav")):
        want = vp(CLIP, decoder=decoder, do_sample_frames=True, **KWARGS)
        assert np.array_equal(item.pixel_values, want["pixel_values_videos"]), decoder
        assert item.video["decoder"] == decoder
    path = tmp_path / "clip.mp4"
    path.write_bytes(CLIP)
    rc = main(["--target", srv.target, "--model", "q2", "--video", str(path), "--fps", "8",
               "--verify", "--transport", "inline"])
    out = capsys.readouterr().out
    assert rc == 0 and "identical to in-process (video)" in out, out


def test_an_unknown_server_decoder_is_refused_at_start():
    from smg_fast.server import ServerConfig

    with pytest.raises(ValueError, match="--video-decoder"):
        ServerConfig(video_decoder="decord").validate()
