"""A stream whose frame size changes mid-stream, against transformers' PyAV loader.

Clips are spliced from segments of different sizes (smg_fast.testing.video_clips.resized_clip:
H.264 / HEVC parameter sets repeated in-band, VP9 keyframe headers). transformers' loader stacks
the sampled frames: one size (even one the header does not declare) is returned, two sizes raise
ValueError. smg-fast's loader returns the same frames or raises InvalidVideoError, on each decode
path, before a frame of the second size is kept; the server, whose output and decode budget are
planned from the header, refuses a sampled frame of another size and a larger unsampled one."""

from __future__ import annotations

import io

import numpy as np
import pytest

from smg_fast.errors import InvalidVideoError
from smg_fast.testing.video_clips import codecs_available, resized_clip
from smg_fast.video import iter_frames, load_video, open_video
from smg_fast.video.decode_memory import format_bytes

av = pytest.importorskip("av")
MP4 = [c for c in ("h264", "hevc") if c in codecs_available()]
# (threads, skip): PyAV's default (skip decode for H.264 / HEVC), the plain sequential decode,
# and the parallel GOP decode.
PATHS = [(None, True), (None, False), (2, True)]
SPLICED = {c: resized_clip(c, ((96, 64, 6), (128, 96, 6))) for c in MP4}


def _reference(tmp_path, data: bytes, indices: list[int]):
    """transformers' load_video (PyAV backend) on data with these indices."""
    from transformers.video_utils import load_video as hf_load_video

    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    return hf_load_video(str(path), backend="pyav",
                         sample_indices_fn=lambda metadata, **kw: np.array(indices))


def test_the_spliced_clip_changes_size_where_the_header_does_not_say():
    with av.open(io.BytesIO(SPLICED["h264"])) as c:
        stream = c.streams.video[0]
        assert (stream.width, stream.height, stream.frames) == (96, 64, 12)
        sizes = [(f.width, f.height) for f in c.decode(video=0)]
    assert sizes == [(96, 64)] * 6 + [(128, 96)] * 6


@pytest.mark.parametrize("codec", MP4)
@pytest.mark.parametrize(("threads", "skip"), PATHS)
@pytest.mark.parametrize("indices", [[0, 3, 5], [6, 9, 11], [7]])
def test_sampled_frames_of_one_size_equal_the_loader(tmp_path, codec, threads, skip, indices):
    ref, ref_meta = _reference(tmp_path, SPLICED[codec], indices)
    got, meta = load_video(SPLICED[codec], indices=indices, threads=threads, skip=skip)
    assert got.shape == ref.shape and np.array_equal(got, ref)
    assert (meta["width"], meta["height"]) == (ref_meta.width, ref_meta.height) == (96, 64)


@pytest.mark.parametrize("codec", MP4)
@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_sampled_frames_of_two_sizes_are_refused_as_the_loader_fails(tmp_path, codec, threads,
                                                                      skip):
    with pytest.raises(ValueError):  # np.stack of two shapes
        _reference(tmp_path, SPLICED[codec], [0, 5, 6, 11])
    with pytest.raises(InvalidVideoError, match="changes mid-stream") as info:
        load_video(SPLICED[codec], indices=[0, 5, 6, 11], threads=threads, skip=skip)
    assert {"96x64", "128x96"} <= set(str(info.value).replace(",", " ").split())


@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_the_refusal_comes_before_the_rest_of_the_stream_is_decoded(threads, skip):
    """The first frame of the new size stops decoding: frames past it are not decoded."""
    data = resized_clip("h264", ((96, 64, 6), (128, 96, 30)))
    header = open_video(0, data)
    checks = []
    try:
        with pytest.raises(InvalidVideoError, match="frame 6 is 128x96, larger than the 96x64"):
            list(iter_frames(header, [0, 35], threads, skip, check=lambda: checks.append(1)))
    finally:
        header.close()
    assert len(checks) < 20  # 36 frames (and packets) before the fix


@pytest.mark.parametrize(("threads", "skip"), PATHS[:2])
def test_the_server_refuses_a_larger_segment_it_did_not_plan_for(threads, skip):
    """Sampled frames of the header's size around a larger segment: planned memory too small."""
    data = resized_clip("h264", ((96, 64, 6), (192, 128, 6), (96, 64, 6)))
    header = open_video(0, data)
    try:
        with pytest.raises(InvalidVideoError, match="frame 6 is 192x128, larger than"):
            list(iter_frames(header, [0, 2, 12, 17], threads, skip))
    finally:
        header.close()


def test_the_parallel_decode_never_decodes_the_larger_unsampled_segment(tmp_path):
    """Its groups without a sampled frame are not decoded: the frames are the loader's."""
    data = resized_clip("h264", ((96, 64, 6), (192, 128, 6), (96, 64, 6)))
    ref, _ = _reference(tmp_path, data, [0, 2, 12, 17])
    header = open_video(0, data)
    try:
        got = np.stack([rgb for _, rgb in iter_frames(header, [0, 2, 12, 17], 2)])
    finally:
        header.close()
    assert np.array_equal(got, ref)


def test_the_served_processor_refuses_a_size_change_as_invalid_argument(tmp_path):
    from smg_fast.processors.loader import load_video_processor

    data = SPLICED["h264"]
    with pytest.raises(ValueError):
        _reference(tmp_path, data, [0, 11])
    vp = load_video_processor("qwen2_vl")
    with pytest.raises(InvalidVideoError, match="changes mid-stream"):
        vp(data, num_frames=2)


def test_a_smaller_unsampled_segment_is_decoded_through(tmp_path):
    data = resized_clip("h264", ((128, 96, 6), (96, 64, 6), (128, 96, 6)))
    ref, _ = _reference(tmp_path, data, [0, 5, 12, 17])
    header = open_video(0, data)
    try:
        got = np.stack([rgb for _, rgb in iter_frames(header, [0, 5, 12, 17])])
    finally:
        header.close()
    assert np.array_equal(got, ref)


@pytest.mark.skipif("vp9" not in codecs_available(), reason="no VP9 encoder")
def test_a_vp9_keyframe_of_another_size_follows_a_plain_pyav_loop():
    """WebM declares no frame count (the loader cannot sample it): a plain PyAV loop instead."""
    data = resized_clip("vp9", ((96, 64, 6), (128, 96, 6)))
    with av.open(io.BytesIO(data)) as c:
        every = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    got, _ = load_video(data, indices=[6, 8, 11])
    assert np.array_equal(got, np.stack([every[6], every[8], every[11]]))
    with pytest.raises(InvalidVideoError, match="changes mid-stream"):
        load_video(data, indices=[0, 11])


@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_a_much_larger_segment_is_never_decoded_at_its_size(threads, skip):
    """A 64x64 header before 1024x1024 pictures: FFmpeg refuses to allocate them (max_pixels).

    The planned decode memory is the header's; SizeCheck sees a frame only once decoded, so
    without the cap the larger pictures (and their references) were allocated first and
    SizeCheck refused the first of them ("larger than"). With it no such picture is output:
    the decode stops with FFmpeg's error, or (the skip decode, where the H.264 decoder drops
    the pictures it cannot allocate) the sampled frames from the other segments are the
    library loader's."""
    data = resized_clip("h264", ((64, 64, 4), (1024, 1024, 4), (64, 64, 4)))
    want, _ = load_video(data, indices=[0, 11])  # the library's loader follows sizes, uncapped
    header = open_video(0, data)
    try:
        got = np.stack([rgb for _, rgb in iter_frames(header, [0, 11], threads, skip)])
    except InvalidVideoError as exc:
        assert "corrupt video stream" in str(exc) and "larger than" not in str(exc), exc
    else:
        assert np.array_equal(got, want)
    finally:
        header.close()


@pytest.mark.parametrize("threads", [None, 1])
def test_the_skip_decode_and_the_plain_decode_after_its_give_up_are_capped(threads, monkeypatch):
    """The skip decode's container and, after its give-up, the header's decoder are capped.

    The skip decode runs on a second container with the header's cap and threads; the plain
    decode after it runs on the header's decoder, never opened till then."""
    from smg_fast.video import decode as decode_mod

    seen = []

    def gave_up(header, wanted, rank, check=None, sizes=None, container=None, stream=None):
        ctx = stream.codec_context
        seen.append((dict(ctx.options), ctx.thread_count, ctx.thread_type.name, ctx.is_open))
        for _ in zip(range(3), container.decode(stream), strict=False):
            pass  # decoded a little, then the plan left
        assert not header.stream.codec_context.is_open
        return None

    monkeypatch.setattr(decode_mod, "decode_skipping", gave_up)
    data = resized_clip("h264", ((64, 64, 4), (1024, 1024, 4), (64, 64, 4)))
    header = open_video(0, data)
    try:
        with pytest.raises(InvalidVideoError, match="corrupt video stream") as err:
            list(iter_frames(header, [0, 11], threads))
        assert "larger than" not in str(err.value)
    finally:
        header.close()
    ((options, count, kind, was_open),) = seen
    assert "max_pixels" in options and not was_open
    assert kind == "SLICE" and (threads is None or count == 1)


@pytest.mark.parametrize("codec", [c for c in ("h264", "hevc", "vp8", "vp9", "av1", "mpeg4")
                                   if c in codecs_available()])
@pytest.mark.parametrize(("width", "height"), [(16, 16), (100, 58), (1282, 722)])
def test_the_cap_passes_every_codec_at_awkward_sizes(codec, width, height):
    """FFmpeg checks its padded picture size: the cap must leave valid streams decoding."""
    from smg_fast.testing.video_clips import make_clip

    try:
        data = make_clip(codec, width, height, 3)
    except av.FFmpegError as exc:  # an encoder refusing the size (x265 below 64 or odd sides)
        pytest.skip(f"{codec} does not encode {width}x{height}: {exc}")
    header = open_video(0, data)
    try:
        got = [rgb for _, rgb in iter_frames(header, [0, 1, 2], threads=1, skip=False)]
    finally:
        header.close()
    with av.open(io.BytesIO(data)) as c:
        every = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(got) == 3 and all(np.array_equal(a, b) for a, b in zip(got, every, strict=True))


# One H.264 stream whose pixel format widens (4:2:0 -> 4:4:4, twice the bytes per frame) or
# narrows mid-stream at one size; the header declares the first segment's.
WIDENING = resized_clip("h264", ((96, 64, 6), (96, 64, 6, "yuv444p")))
NARROWING = resized_clip("h264", ((96, 64, 6, "yuv444p"), (96, 64, 6)))


def test_the_spliced_clip_changes_pixel_format_where_the_header_does_not_say():
    with av.open(io.BytesIO(WIDENING)) as c:
        assert c.streams.video[0].codec_context.format.name == "yuv420p"
        formats = [f.format.name for f in c.decode(video=0)]
    assert formats == ["yuv420p"] * 6 + ["yuv444p"] * 6


@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_a_wider_pixel_format_is_refused_where_decode_memory_was_planned(threads, skip):
    """The server's decode: each held frame may take no more bytes than the header's format."""
    header = open_video(0, WIDENING)
    try:
        with pytest.raises(InvalidVideoError, match=r"frame 6 is 96x64 in yuv444p, 18432 bytes, "
                                                    r"more than the 9216 .* pixel format changes"):
            list(iter_frames(header, [0, 6, 11], threads, skip))
    finally:
        header.close()


@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_the_library_loader_follows_a_pixel_format_change(tmp_path, threads, skip):
    """load_video converts every sampled frame, whatever its format, as transformers' does."""
    ref, _ = _reference(tmp_path, WIDENING, [0, 6, 11])
    got, _ = load_video(WIDENING, indices=[0, 6, 11], threads=threads, skip=skip)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize(("threads", "skip"), PATHS)
def test_a_narrower_pixel_format_is_decoded_through(tmp_path, threads, skip):
    ref, _ = _reference(tmp_path, NARROWING, [0, 6, 11])
    header = open_video(0, NARROWING)
    try:
        got = np.stack([rgb for _, rgb in iter_frames(header, [0, 6, 11], threads, skip)])
    finally:
        header.close()
    assert np.array_equal(got, ref)


def test_the_served_processor_refuses_a_wider_pixel_format(tmp_path):
    from smg_fast.processors.loader import load_video_processor

    ref, _ = _reference(tmp_path, WIDENING, [0, 11])  # transformers converts both formats
    assert ref.shape == (2, 64, 96, 3)
    with pytest.raises(InvalidVideoError, match="pixel format changes mid-stream"):
        load_video_processor("qwen2_vl")(WIDENING, num_frames=2)


@pytest.mark.parametrize("name,size,want", [
    # 4:2:0 at 8 bits: the luma plane and two chroma planes of half size rounded up
    ("yuv420p", (1920, 1080), 1920 * 1080 + 2 * 960 * 540),
    ("yuv420p", (97, 65), 97 * 65 + 2 * 49 * 33),
    ("nv12", (97, 65), 97 * 65 + 2 * 49 * 33),
    ("yuv444p10le", (98, 66), 3 * 98 * 66 * 2),
    ("gray", (5, 3), 15),
    ("rgba64le", (4, 4), 4 * 4 * 8),
    ("bgr0", (5, 3), 5 * 3 * 4),  # a padding byte per pixel
])
def test_format_bytes_counts_the_size_asked_not_the_format_objects(name, size, want):
    """A frame's bytes at the size given, whatever size the PyAV format object was made for."""
    assert format_bytes(av.VideoFormat(name, 2, 2), *size) == want
    assert format_bytes(None, *size) >= want  # a format the header does not name: the widest
