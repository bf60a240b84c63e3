"""The torchcodec and OpenCV decoders: frames and metadata equal to the real libraries'.

Clips are made here with PyAV: H.264 at widths that are and are not multiples of 16, full and
limited range, BT.601 and BT.709 tags, 4:2:2 and 4:4:4, display rotations, variable frame rate,
10-bit HEVC, VP9 in WebM, interlaced (MBAFF) H.264, odd heights (MPEG-4 4:2:0, H.264 4:2:2).
The reference frames come from torchcodec 0.17 and OpenCV 5.1 (opencv-python's bundled FFmpeg)
in the vLLM venv (tests/video/decoder_oracle_script.py); torchcodec there needs FFmpeg's shared
libraries (Debian's libavcodec59 and friends). The end-to-end checks run transformers' video
processors (the torchvision venv) on torchcodec's frames and metadata, which is what their
``fetch_videos`` hands them for a path, against smg-fast's ``decoder="torchcodec"`` on the
clip's bytes."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.engine_common import engine_python_or_fail
from support.oracle_cache import cached_batch

from smg_fast.errors import FrameIndexError, UnsupportedCallError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import codecs_available, make_clip, trimmed_clip
from smg_fast.video import DECODERS, load_video

pytest.importorskip("av")

SCRIPT = Path(__file__).with_name("decoder_oracle_script.py")
BT709 = {"x264-params": "colorprim=bt709:transfer=bt709:colormatrix=bt709"}


def _vfr_clip() -> bytes:
    """A variable frame rate H.264 MP4: frame gaps of 20 and 90 ms (pts in milliseconds)."""
    import io
    from fractions import Fraction

    import av

    from smg_fast.testing.video_clips import scene_frame, texture

    picture, buf, t = texture(128, 128), io.BytesIO(), 0
    with av.open(buf, "w", format="mp4", options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = 98, 62, "yuv420p"
        stream.codec_context.thread_count = 1
        stream.codec_context.time_base = Fraction(1, 1000)
        for i in range(16):
            frame = av.VideoFrame.from_ndarray(scene_frame(picture, 98, 62, i), format="rgb24")
            frame.pts, frame.time_base = t, Fraction(1, 1000)
            t += 20 if i % 3 else 90
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def _clips() -> dict[str, bytes]:
    clips = {
        "h264_320x240": make_clip("h264", 320, 240, 16),  # a width swscale takes whole
        "h264_98x62": make_clip("h264", 98, 62, 16),
        "h264_full_range": make_clip("h264", 128, 72, 12, pix_fmt="yuvj420p"),
        "h264_bt709_102x70": make_clip("h264", 102, 70, 12, options=BT709),
        "h264_444_99x63": make_clip("h264", 99, 63, 12, pix_fmt="yuv444p"),
        "h264_422_130x64": make_clip("h264", 130, 64, 12, pix_fmt="yuv422p"),
        "h264_one_frame": make_clip("h264", 66, 38, 1),
        # Interlaced (MBAFF): PyAV's and OpenCV's conversions take its fields apart, torchcodec's
        # does not.
        "h264_mbaff_96x64": make_clip("h264", 96, 64, 12, options={
            "x264-params": "interlaced=1:bframes=2"}),
        # Odd heights and an odd field height: converted as each library does (chroma location).
        "mpeg4_odd_height": make_clip("mpeg4", 96, 61, 12),
        "h264_422_odd_height": make_clip("h264", 98, 61, 12, pix_fmt="yuv422p"),
        "h264_422_mbaff_64x54": make_clip("h264", 64, 54, 12, pix_fmt="yuv422p",
                                          options={"x264-params": "interlaced=1"}),
        # Display rotation: torchcodec and OpenCV turn the frames upright, PyAV's loader does not.
        "h264_rotated_90": make_clip("h264", 98, 62, 12, rotation=90),
        "h264_rotated_180": make_clip("h264", 98, 62, 12, rotation=180),
        "h264_rotated_270": make_clip("h264", 98, 62, 12, rotation=270),
        "h264_vfr": _vfr_clip(),
        # An edit list cuts the first 3 of 16 frames: their packets are demuxed, flagged discard.
        "h264_edit_list": trimmed_clip(make_clip("h264", 98, 62, 16), 3),
        # Closed groups of 12 frames: the parallel decode (threads >= 2) cuts it into runs.
        "h264_gops_rotated_90": make_clip("h264", 98, 62, 48, fps=12, rotation=90, options={
            "x264-params": "keyint=12:min-keyint=12:scenecut=0"}),
    }
    have = codecs_available()
    assert {"h264", "hevc", "vp9"} <= set(have), have  # the test extra's PyAV has them
    clips["hevc_10bit_98x70"] = make_clip("hevc", 98, 70, 12, pix_fmt="yuv420p10le",
                                          options={"x265-params": "log-level=error"})
    clips["hevc_full_range"] = make_clip("hevc", 96, 64, 12, options={
        "x265-params": "range=full:colormatrix=bt709:log-level=error"})
    clips["vp9_webm_98x62"] = make_clip("vp9", 98, 62, 12)
    return clips


CLIPS = _clips()
# Sparse indices take the skip decode (H.264 / HEVC non-reference frames not decoded).
INDICES = {name: ([0] if name == "h264_one_frame" else [0, 3, 4, 9, 11])
           for name in CLIPS}
INDICES["h264_gops_rotated_90"] = [1, 13, 26, 40, 47]
INDICES["h264_edit_list"] = list(range(13))  # every frame the decoders output


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def references(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Per clip: torchcodec's frames and metadata, OpenCV's frames (cached by the clip)."""
    names = sorted(CLIPS)
    jobs = [{"video": CLIPS[n], "indices": INDICES[n]} for n in names]
    workdir = tmp_path_factory.mktemp("decoders")
    shared = (str(vllm_python), SCRIPT.read_bytes())
    out = cached_batch("video-decoders", shared, jobs, lambda todo: _run(vllm_python, workdir,
                                                                        todo))
    return dict(zip(names, out, strict=True))


def _run(python: Path, workdir: Path, jobs: list[dict]) -> list[dict[str, np.ndarray]]:
    with open(workdir / "jobs.pkl", "wb") as fh:
        pickle.dump(jobs, fh)
    proc = subprocess.run([str(python), str(SCRIPT), str(workdir)], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"{SCRIPT.name} failed in the vLLM venv:\n{proc.stderr[-4000:]}",
                    pytrace=False)
    keys = ("torchcodec", "torchcodec_meta", "opencv")
    return [{k: np.load(workdir / f"{i}_{k}.npy") for k in keys} for i in range(len(jobs))]


@pytest.mark.parametrize("name", sorted(CLIPS))
@pytest.mark.parametrize("decoder", ["torchcodec", "opencv"])
def test_frames_equal_the_library(references: dict, name: str, decoder: str) -> None:
    """The sampled frames are the library's, bit for bit, on the skip and the plain decode."""
    want = references[name][decoder]
    for skip in (True, False):
        got, meta = load_video(CLIPS[name], INDICES[name], decoder=decoder, skip=skip)
        assert got.shape == want.shape, (name, skip)
        assert np.array_equal(got, want), (name, decoder, skip)
        assert meta["video_backend"] == decoder


# On the VFR clip torchcodec (on Debian's FFmpeg 5.1) reads every frame's duration as 0 where
# PyAV's FFmpeg 8.1 demuxes 20 to 1440 ticks, so the measured span and rate differ (the cause
# in FFmpeg is not established); the frames are identical (test_frames_equal_the_library).
VFR_METADATA = pytest.mark.xfail(strict=True, reason="VFR packet durations differ between "
                                 "torchcodec's FFmpeg 5.1 and PyAV's FFmpeg 8.1")


@pytest.mark.parametrize("name", [pytest.param(n, marks=VFR_METADATA) if n == "h264_vfr" else n
                                  for n in sorted(CLIPS)])
def test_torchcodec_metadata_is_the_scan(references: dict, name: str) -> None:
    """total_num_frames, fps and duration as torchcodec's exact mode measures them."""
    total, fps, duration = references[name]["torchcodec_meta"]
    _, meta = load_video(CLIPS[name], [0], decoder="torchcodec")
    assert meta["total_num_frames"] == int(total)
    assert meta["fps"] == fps and meta["duration"] == duration, (meta, fps, duration)


def test_conversions_differ_where_the_libraries_do(references: dict) -> None:
    """The decoders are not one conversion under three names: 10-bit frames differ."""
    ref = references["hevc_10bit_98x70"]
    assert not np.array_equal(ref["torchcodec"], ref["opencv"])
    pyav, _ = load_video(CLIPS["hevc_10bit_98x70"], INDICES["hevc_10bit_98x70"])
    assert not np.array_equal(pyav, ref["opencv"])
    assert not np.array_equal(pyav, ref["torchcodec"])


def test_rotation_is_applied_by_the_players_only(references: dict) -> None:
    """torchcodec and OpenCV turn a rotated stream upright; pyav keeps the stored frames."""
    for angle in (90, 180, 270):
        name = f"h264_rotated_{angle}"
        stored, _ = load_video(CLIPS[name], INDICES[name])
        for decoder in ("torchcodec", "opencv"):
            want = references[name][decoder]
            assert np.array_equal(want, np.rot90(stored, angle // 90, axes=(1, 2))), (name,
                                                                                        decoder)
            _, meta = load_video(CLIPS[name], [0], decoder=decoder)
            assert (meta["height"], meta["width"]) == want.shape[1:3]
            assert meta["rotation"] == angle


def test_webm_rate_is_measured_for_torchcodec(references: dict) -> None:
    """WebM's header rate (24) and torchcodec's measured rate differ; each reader keeps its own."""
    _, tc = load_video(CLIPS["vp9_webm_98x62"], [0], decoder="torchcodec")
    _, av_meta = load_video(CLIPS["vp9_webm_98x62"], [0])
    assert av_meta["fps"] == 24.0 and tc["fps"] != 24.0
    assert tc["fps"] == references["vp9_webm_98x62"]["torchcodec_meta"][1]


def test_unknown_decoder_and_bad_index_are_typed() -> None:
    """An unknown decoder is an UnsupportedCallError naming the known ones; indices checked first.

    UnsupportedCallError is a ValueError; a call option naming a decoder is checked as well."""
    clip = CLIPS["h264_98x62"]
    with pytest.raises(UnsupportedCallError, match="torchcodec"):
        load_video(clip, [0], decoder="decord")
    with pytest.raises(UnsupportedCallError, match="torchcodec"):
        load_video_processor("qwen2_vl", decoder="ffmpeg")
    vp = load_video_processor("qwen2_vl")
    for bad in ("decord", 1, ["opencv"]):
        with pytest.raises(UnsupportedCallError, match="torchcodec"):
            vp(clip, decoder=bad)
        with pytest.raises(UnsupportedCallError, match="torchcodec"):
            vp.plan(clip, "float32", decoder=bad)
    for decoder in DECODERS:
        with pytest.raises(FrameIndexError):
            load_video(clip, [16], decoder=decoder)


def _frames_job(cls: str, name: str, ref: dict, call: dict) -> dict:
    """transformers' processor on every torchcodec frame with torchcodec's metadata."""
    total, fps, duration = ref["torchcodec_meta"]
    frames = ref["all_torchcodec"]
    meta = {"total_num_frames": int(total), "fps": float(fps), "duration": float(duration),
            "height": frames.shape[1], "width": frames.shape[2],
            "frames_indices": list(range(len(frames)))}  # as torchcodec's reader reads them all
    return {"cls": cls, "kwargs": {}, "video": frames, "call": {**call, "video_metadata": meta}}


def test_processor_equals_transformers_on_torchcodec_frames(
        vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """decoder="torchcodec" on the bytes equals transformers' processors on torchcodec's output.

    Its frames and metadata, as ``fetch_videos`` hands them over for a path."""
    from video_oracle import run_oracle

    names = ["vp9_webm_98x62", "hevc_10bit_98x70", "h264_320x240", "h264_rotated_90",
             "h264_edit_list"]
    jobs = [{"video": CLIPS[n], "indices": list(range(
        load_video(CLIPS[n], [0], decoder="torchcodec")[1]["total_num_frames"]))} for n in names]
    workdir = tmp_path_factory.mktemp("decoders_all")
    shared = (str(vllm_python), SCRIPT.read_bytes())
    refs = cached_batch("video-decoders", shared, jobs,
                        lambda todo: _run(vllm_python, workdir, todo))
    cases = []
    for name, ref in zip(names, refs, strict=True):
        ref = {"torchcodec_meta": ref["torchcodec_meta"], "all_torchcodec": ref["torchcodec"]}
        cases.append((name, "qwen2", {"do_sample_frames": True, "fps": 8}, ref))
        cases.append((name, "qwen3", {}, ref))  # its default: 2 fps from the metadata
        cases.append((name, "qwen2", {}, ref))  # its default: every frame
    oracle_jobs = [_frames_job(cls, name, ref, call) for name, cls, call, ref in cases]
    outs = run_oracle(tmp_path_factory.mktemp("decoders_tf"), oracle_jobs)
    for (name, cls, call, _), want in zip(cases, outs, strict=True):
        vp = load_video_processor("qwen2_vl" if cls == "qwen2" else "qwen3_vl")
        got = vp(CLIPS[name], decoder="torchcodec", return_metadata=True, **call)
        assert np.array_equal(got["video_metadata"][0]["frames_indices"], want["indices"]), name
        assert np.array_equal(got["video_grid_thw"], want["grid"]), name
        assert np.array_equal(got["pixel_values_videos"], want["pixel_values"]), (name, cls)


def test_the_decoder_is_chosen_per_processor_and_per_call() -> None:
    """load_video_processor(decoder=) sets the default; a call's decoder option overrides it.

    Through the video processor's call and proc's videos_kwargs; on a 10-bit clip the choice
    changes the tensor."""
    import smg_fast

    clip, opts = CLIPS["hevc_10bit_98x70"], {"do_sample_frames": True, "fps": 8}
    per_call = load_video_processor("qwen2_vl")(clip, decoder="opencv", **opts)
    default = load_video_processor("qwen2_vl", decoder="opencv")(clip, **opts)
    via_proc = smg_fast.load_processor("qwen2_vl")(videos=clip,
                                                  videos_kwargs={**opts, "decoder": "opencv"})
    pyav = load_video_processor("qwen2_vl")(clip, **opts)
    for out in (default, via_proc):
        assert np.array_equal(out["pixel_values_videos"], per_call["pixel_values_videos"])
    assert not np.array_equal(pyav["pixel_values_videos"], per_call["pixel_values_videos"])
    back = load_video_processor("qwen2_vl", decoder="opencv")(clip, decoder="pyav", **opts)
    assert np.array_equal(back["pixel_values_videos"], pyav["pixel_values_videos"])


@pytest.mark.parametrize("decoder", ["torchcodec", "opencv"])
def test_ffmpeg_threads_apply_with_every_decoder(references: dict, decoder: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """FFmpeg threads work with every decoder, the parallel decode of closed groups included.

    Threads are set before the rotation read opens the decoder; with 0 or 2 threads the clip's
    closed groups are decoded in runs, and the frames are still the library's."""
    from smg_fast.video import parallel_decode

    runs: list[object] = []
    real = parallel_decode._decode_run
    monkeypatch.setattr(parallel_decode, "_decode_run",
                        lambda *a: runs.append(a[2]) or real(*a))
    name = "h264_gops_rotated_90"
    want = references[name][decoder]
    for threads in (0, 1, 2):
        got, _ = load_video(CLIPS[name], INDICES[name], threads=threads, decoder=decoder)
        assert np.array_equal(got, want), threads
        vp = load_video_processor("qwen2_vl", threads=threads, decoder=decoder)
        out = vp(CLIPS[name], do_sample_frames=True, fps=8)
        assert out["video_grid_thw"].shape == (1, 3)
    assert len(runs) >= 2  # threads 0 and 2 cut the clip into runs of groups


@pytest.mark.parametrize("decoder", ["torchcodec", "opencv"])
def test_planning_leaves_the_decoder_closed(decoder: str) -> None:
    """The rotation read at planning decodes on a decoder of its own, closed at once.

    A server admits a video on its plan before its decode budget is taken, so planning opens
    none of the stream's (frame-threaded) decoder; the frames are still turned upright."""
    clip = CLIPS["h264_rotated_90"]
    vp = load_video_processor("qwen2_vl", threads=0, decoder=decoder)
    planned = vp.plan(clip, "float32")
    try:
        assert not planned._source._header.stream.codec_context.is_open
        assert planned.metadata["rotation"] == 90
        assert (planned.metadata["height"], planned.metadata["width"]) == (98, 62)
    finally:
        planned.close()
    opts = {"do_sample_frames": False}
    assert np.array_equal(vp(clip, **opts)["pixel_values_videos"],
                          load_video_processor("qwen2_vl", decoder=decoder)(
                              clip, **opts)["pixel_values_videos"])


def test_every_frame_is_every_frame_torchcodec_outputs(references: dict) -> None:
    """Unsampled, decoder="torchcodec" gives torchcodec's frames: an edit list's cut not counted.

    The header counts 16 frames, torchcodec's scan 13 (the cut packets are flagged discard)."""
    clip = CLIPS["h264_edit_list"]
    got, meta = load_video(clip, decoder="torchcodec")
    assert meta["total_num_frames"] == 13 and meta["frames_indices"] == list(range(13))
    assert np.array_equal(got, references["h264_edit_list"]["torchcodec"])
