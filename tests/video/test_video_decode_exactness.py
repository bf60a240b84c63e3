"""Where the loader's frames need care: damaged streams, open-group starts, multi-slice HEVC.

Each compares smg-fast's frames with transformers' read_video_pyav run in process (PyAV:
seek(0), the listed frames kept to the last one, then converted) or with PyAV's own decode."""

from __future__ import annotations

import io

import numpy as np
import pytest

from smg_fast.testing.video_clips import codecs_available, make_clip
from smg_fast.video import load_video, open_video

av = pytest.importorskip("av")  # a test dependency: never missing in CI
ENCODABLE = codecs_available()


DAMAGED_SOURCES = {
    "h264_b_pyramid": ("h264", {"x264-params": "bframes=3:b-pyramid=normal:keyint=12"}),
    "h264_mbaff": ("h264", {"x264-params": "interlaced=1:bframes=2"}),
    "hevc": ("hevc", {"x265-params": "log-level=error:bframes=4"}),
    "vp9": ("vp9", None),
    "mpeg4": ("mpeg4", None),
}


def _loader_frames(data: bytes, indices: list[int], threads: int | None) -> np.ndarray | None:
    """transformers' read_video_pyav, in process; None where it raises or gives too few frames.

    seek(0), the listed frames kept (the others dropped as decoded) up to the last one, then
    converted. The decoder's threads as ``load_video(threads=...)`` sets them (None: PyAV's
    defaults)."""
    kept: list = []
    try:
        with av.open(io.BytesIO(data)) as c:
            stream = c.streams.video[0]
            if threads is not None:
                stream.codec_context.thread_count = threads
                stream.codec_context.thread_type = "SLICE" if threads == 1 else "AUTO"
            c.seek(0)
            for i, frame in enumerate(c.decode(stream)):
                if i > indices[-1]:
                    break
                if i in indices:
                    kept.append(frame)
    except Exception:  # noqa: BLE001 - the loader raises it: no frames
        return None
    if len(kept) != len(indices):
        return None
    return np.stack([f.to_ndarray(format="rgb24") for f in kept])


@pytest.mark.parametrize("name", [n for n, (codec, _) in DAMAGED_SOURCES.items()
                                  if codec in ENCODABLE])
@pytest.mark.parametrize("threads", [None, 1])
def test_damaged_streams_decode_as_the_loader_decodes_them(name, threads):
    """Damaged streams decoded plainly: the loader's frames, bit for bit, on its threads.

    Bytes are overwritten at seeded places in the coded data. The sampled frames are held until
    decoding ends, as the loader holds them: FFmpeg's concealment of a damaged H.264 stream can
    read the memory of frame buffers its pool hands out again, so releasing frames earlier
    changes its pixels. (The skip decode is not exact on every damaged stream: docs/video.md.)
    Each damaged stream the loader decodes to enough frames is compared (at least eight of
    them, so the comparison is not vacuous)."""
    skip = False
    codec, options = DAMAGED_SOURCES[name]
    clean = make_clip(codec, 96, 64, 24, fps=12, options=options)
    rng = np.random.default_rng(7)
    indices = list(range(0, 24, 3))
    compared = 0
    for _ in range(24):
        data = bytearray(clean)
        for pos in rng.integers(len(data) // 10, len(data), int(rng.integers(1, 6))):
            data[pos] = int(rng.integers(256))
        ref = _loader_frames(bytes(data), indices, threads)
        if ref is None:
            continue
        got, _ = load_video(bytes(data), indices=indices, threads=threads, skip=skip)
        assert np.array_equal(got, ref), name
        compared += 1
    assert compared >= 8, compared


def test_a_file_replaced_after_opening_is_decoded_as_first_opened(tmp_path):
    """The skip decode's second container refuses the replaced file; the header's decodes it."""
    from smg_fast.video import iter_frames

    first = make_clip("h264", 96, 64, 24, fps=12)
    path = tmp_path / "clip.mp4"
    path.write_bytes(first)
    want, _ = load_video(first, indices=[0, 5, 11])
    header = open_video(0, str(path))
    try:
        other = tmp_path / "other.mp4"
        other.write_bytes(make_clip("h264", 96, 64, 24, fps=12,
                                    picture=np.full((120, 160, 3), 40, np.uint8)))
        other.replace(path)  # another inode at the path
        got = np.stack([rgb for _, rgb in iter_frames(header, [0, 5, 11])])
    finally:
        header.close()
    assert np.array_equal(got, want)


def _from_second_keyframe(data: bytes, fmt: str) -> bytes:
    """data's video packets from its second keyframe on, remuxed into fmt.

    An open group's recovery point or CRA picture comes first, its leading frames referring to
    what is cut."""
    buf = io.BytesIO()
    with av.open(io.BytesIO(data)) as src, av.open(buf, "w", format=fmt) as out:
        stream = src.streams.video[0]
        dst = out.add_stream_from_template(stream)
        keyframes = 0
        for packet in src.demux(stream):
            if packet.dts is None:
                continue
            keyframes += packet.is_keyframe
            if keyframes >= 2:
                packet.stream = dst
                out.mux(packet)
    return buf.getvalue()


OPEN_GOP = {"h264": {"x264-params": "open-gop=1:keyint=12:bframes=3:repeat-headers=1"},
            "hevc": {"x265-params": "keyint=12:bframes=4:open-gop=1:log-level=error"}}


@pytest.mark.parametrize("codec", [c for c in OPEN_GOP if c in ENCODABLE])
@pytest.mark.parametrize("fmt", ["matroska", "mpegts", "mp4"])
def test_a_stream_starting_at_an_open_group_decodes_as_the_loader_decodes_it(codec, fmt):
    """A first picture that is not IDR: the frames are the loader's, skip decode or not.

    FFmpeg drops the frames it cannot show, so the skip decode (which counts frames by pts) is
    not used there."""
    data = _from_second_keyframe(make_clip(codec, 96, 64, 48, fps=12, options=OPEN_GOP[codec]),
                                 fmt)
    from smg_fast.video.skip_decode import plan_skips

    header = open_video(0, data)
    try:  # the cut starts at a picture that is not IDR: the skip decode is not planned
        assert plan_skips(header) is None
    finally:
        header.close()
    indices = [0, 3, 6, 9, 20]
    ref = _loader_frames(data, indices, None)
    assert ref is not None  # the loader decodes it
    for skip in (True, False):
        got, _ = load_video(data, indices=indices, skip=skip)
        assert np.array_equal(got, ref), (codec, fmt, skip)


@pytest.mark.skipif("hevc" not in ENCODABLE, reason="needs the x265 encoder")
def test_multi_slice_hevc_is_decoded_plainly_and_equals_pyav():
    """Valid HEVC of several slice segments a picture: every frame is PyAV's own.

    Skipping a non-reference picture of such a stream can change a kept picture's later slices,
    so the skip decode is not used for it."""
    from smg_fast.video.nal_units import nal_length_size, slice_segments
    from smg_fast.video.parallel_decode import plan_packets
    from smg_fast.video.skip_decode import iter_packets, plan_skips

    data = make_clip("hevc", 128, 96, 32, fps=24, options={
        "x265-params": "log-level=error:bframes=4:slices=2:keyint=8:open-gop=0"})
    header = open_video(0, data)
    try:  # the clip is what the test is about, and neither skipping plan takes it
        size = nal_length_size(header)
        assert {slice_segments(p, size) for p in iter_packets(header)} == {2}
        assert plan_skips(header) is None and plan_packets(header) is None
    finally:
        header.close()
    with av.open(io.BytesIO(data)) as c:
        ref = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    for i in range(len(ref)):  # slice threads, as the loader's (frame threads differ: docs)
        got, _ = load_video(data, indices=[i])
        assert np.array_equal(got[0], ref[i]), i
