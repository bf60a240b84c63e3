"""A damaged upload served exact with ``--video-decode full`` (``skip=False`` in the library).

The skip decode never decodes the non-reference frames that sampling drops, so damage inside
one of them can change what transformers' loader makes of the stream (its frame count, its
concealment) without the skip decode seeing it. The full decode decodes every frame up to the
last sampled one, as the loader does. The reference: transformers' ``load_video`` (PyAV, the
sampled indices given as ``sample_indices_fn``) decodes the damaged bytes, and its Qwen2-VL
video processor (torchvision venv, video_oracle.py) processes those frames. (On a damaged
stream the loader's frames depend on which frames it holds: decoding every frame and sampling
afterwards gives other pixels; docs/video.md.)"""

from __future__ import annotations

import numpy as np
import pytest
import video_oracle

from smg_fast.errors import InvalidVideoError, UnsupportedVideoError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip
from smg_fast.video import load_video

pytest.importorskip("grpc")

from smg_fast.client import Client  # noqa: E402
from smg_fast.server.flags import config_from_args  # noqa: E402

CALL = {"do_sample_frames": True, "fps": 4}
B_PYRAMID = {"x264-params": "bframes=3:b-pyramid=normal:keyint=12"}


def _sampled(data: bytes) -> list[int]:
    """The frames Qwen2-VL samples from data at CALL's fps (what the processor decodes)."""
    _, meta = load_video(data, indices=[0], skip=False)
    vp = load_video_processor("qwen2_vl", **CALL)
    from smg_fast.processors.video_plan import sample_indices

    return [int(i) for i in sample_indices(vp.config, meta)]


@pytest.fixture(scope="module")
def damaged() -> bytes:
    """A B-pyramid H.264 clip with a few bytes overwritten (seeded, the first of 400 tries).

    One where the skip decode's sampled frames differ from the full decode's: the case the
    option exists for (about 1 damaged clip in 100 of this kind)."""
    clean = make_clip("h264", 160, 96, 48, fps=12, options=B_PYRAMID)
    rng = np.random.default_rng(11)
    for _ in range(400):
        data = bytearray(clean)
        for pos in rng.integers(len(data) // 10, len(data), int(rng.integers(1, 6))):
            data[pos] = int(rng.integers(256))
        data = bytes(data)
        try:
            indices = _sampled(data)
            full, _ = load_video(data, indices=indices, skip=False)
            skipped, _ = load_video(data, indices=indices)
        except (InvalidVideoError, UnsupportedVideoError):
            continue
        if not np.array_equal(full, skipped):
            return data
    raise AssertionError("no seeded damage made the skip decode differ")


@pytest.fixture(scope="module")
def tv_reference(tmp_path_factory, damaged) -> dict[str, np.ndarray]:
    """transformers' loader on the sampled indices, then its video processor on those frames."""
    from transformers.video_utils import load_video as hf_load_video

    indices = _sampled(damaged)
    path = tmp_path_factory.mktemp("full_decode") / "damaged.mp4"
    path.write_bytes(damaged)
    frames, _ = hf_load_video(str(path), backend="pyav",
                              sample_indices_fn=lambda metadata, **kw: np.array(indices))
    jobs = [{"cls": "qwen2", "kwargs": {}, "video": np.ascontiguousarray(frames),
             "call": {"do_sample_frames": False}}]
    out = video_oracle.run_oracle(path.parent, jobs)[0]
    return {**out, "indices": np.asarray(indices)}


def test_the_library_full_decode_equals_transformers(tv_reference, damaged):
    vp = load_video_processor("qwen2_vl", skip=False, **CALL)
    out = vp(videos=[damaged])
    assert np.array_equal(out["video_grid_thw"], tv_reference["grid"].astype(np.int64))
    assert np.array_equal(out["pixel_values_videos"], tv_reference["pixel_values"])


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_a_server_with_full_decode_serves_the_damaged_stream_as_transformers(
        tv_reference, damaged, start_server, transport):
    srv = start_server(models=[("q2", "qwen2_vl")], video_decode="full")
    with Client(srv.target, timeout=60) as c:
        out = c.preprocess(videos=damaged, videos_kwargs={"fps": CALL["fps"]}, model="q2",
                           transport=transport)
    item = out.items[0]
    assert item.video["frames_indices"] == tv_reference["indices"].tolist()
    assert np.array_equal(item.pixel_values, tv_reference["pixel_values"])


def test_video_decode_flag_reads_its_env_var_and_refuses_other_values():
    assert config_from_args([], {}).video_decode == "skip"
    assert config_from_args([], {"SMG_FAST_VIDEO_DECODE": "full"}).video_decode == "full"
    assert config_from_args(["--video-decode", "skip"],
                            {"SMG_FAST_VIDEO_DECODE": "full"}).video_decode == "skip"
    with pytest.raises(SystemExit):
        config_from_args(["--video-decode", "fast"], {})


def test_the_cli_verifies_against_the_loaders_decode(damaged, start_server, tmp_path, capsys):
    """--verify decodes every frame up to the last sampled one, as the reference loader does.

    A full-decode server's damaged video is identical to it; the skip decode's is reported as
    differing (on this clip it is not the loader's)."""
    from smg_fast.client import main

    path = tmp_path / "damaged.mp4"
    path.write_bytes(damaged)
    for mode, verdict, rc_want in (("full", "identical to in-process", 0),
                                   ("skip", "DIFFERS from in-process", 1)):
        srv = start_server(models=[("q2", "qwen2_vl")], video_decode=mode)
        rc = main(["--target", srv.target, "--model", "q2", "--video", str(path), "--fps",
                   str(CALL["fps"]), "--verify", "--transport", "inline"])
        out = capsys.readouterr().out
        assert rc == rc_want and verdict in out, (mode, out)


def test_skip_must_be_a_bool():
    with pytest.raises(TypeError, match="skip must be True or False"):
        load_video_processor("qwen2_vl", skip="false")
