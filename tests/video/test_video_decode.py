"""Decoding: smg_fast.video's frames against transformers' PyAV loader, and refused inputs.

Clips are encoded here with PyAV (smg_fast.testing.video_clips). transformers'
``load_video(..., backend="pyav")`` is the reference where it can read the container (MP4);
WebM / Matroska declare no frame count, which it cannot sample, so there a plain PyAV loop over
every frame is the reference."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from smg_fast.errors import InvalidVideoError, UnsupportedVideoError
from smg_fast.testing.video_clips import codecs_available, make_clip, trimmed_clip
from smg_fast.video import VideoLimits, load_video, open_video

av = pytest.importorskip("av")  # a test dependency: never missing in CI
ENCODABLE = codecs_available()
MP4 = [c for c in ("h264", "hevc", "mpeg4") if c in ENCODABLE]
MKV = [c for c in ("vp9", "av1") if c in ENCODABLE]


def test_the_bundled_ffmpeg_encodes_h264_vp9_and_av1():
    assert {"h264", "vp9", "av1"} <= set(ENCODABLE)


def _reference(tmp_path, data: bytes, indices: list[int]):
    """transformers' load_video (PyAV backend) on data with these indices."""
    from transformers.video_utils import load_video as hf_load_video

    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    return hf_load_video(str(path), backend="pyav",
                         sample_indices_fn=lambda metadata, **kw: np.array(indices))


def _every_frame(data: bytes) -> np.ndarray:
    """Every frame of data, decoded and converted by PyAV in a plain loop."""
    with av.open(io.BytesIO(data)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.mark.parametrize("codec", MP4)
@pytest.mark.parametrize("indices", [[0], [0, 5, 11, 23], [3, 4, 5], [23], list(range(24))])
def test_frames_equal_transformers_pyav_loader(tmp_path, codec, indices):
    data = make_clip(codec, 160, 96, 24, fps=12)
    ref, ref_meta = _reference(tmp_path, data, indices)
    got, meta = load_video(data, indices=indices)
    assert got.dtype == np.uint8 and got.shape == ref.shape
    assert np.array_equal(got, ref)
    for key in ("total_num_frames", "fps", "duration", "height", "width"):
        assert meta[key] == ref_meta[key], key
    assert list(meta["frames_indices"]) == list(ref_meta.frames_indices)


def test_repeated_and_unsorted_indices_follow_the_loader(tmp_path):
    """The loader keeps each listed frame once, in stream order, up to the last listed index."""
    data = make_clip("h264", 64, 48, 12, fps=6)
    for indices in ([2, 2, 5], [7, 1, 4], [5, 9, 3]):
        ref, _ = _reference(tmp_path, data, indices)
        got, _ = load_video(data, indices=indices)
        assert np.array_equal(got, ref), indices


@pytest.mark.parametrize("codec", MKV)
def test_webm_and_matroska_frames_are_counted_and_equal_pyav(codec):
    data = make_clip(codec, 128, 72, 15, fps=15)
    every = _every_frame(data)
    header = open_video(0, data)
    try:
        assert header.counted and header.total_frames == len(every) == 15
        assert header.fps == 15.0
    finally:
        header.close()
    got, _ = load_video(data, indices=[0, 7, 14])
    assert np.array_equal(got, every[[0, 7, 14]])


@pytest.mark.parametrize("size", [(33, 17), (17, 33), (2, 2), (1, 1)])
def test_odd_and_tiny_sizes(tmp_path, size):
    w, h = size
    data = make_clip("h264", w, h, 4, fps=4, pix_fmt="yuv444p")
    ref, _ = _reference(tmp_path, data, [0, 1, 2, 3])
    got, meta = load_video(data)
    assert (meta["width"], meta["height"]) == (w, h)
    assert np.array_equal(got, ref)


def test_one_frame_video(tmp_path):
    data = make_clip("h264", 96, 64, 1, fps=1)
    ref, _ = _reference(tmp_path, data, [0])
    got, meta = load_video(data)
    assert meta["total_num_frames"] == 1 and np.array_equal(got, ref)


def test_a_file_path_reads_as_its_bytes(tmp_path):
    data = make_clip("h264", 64, 48, 6, fps=6)
    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    a, _ = load_video(str(path), indices=[1, 4])
    b, _ = load_video(data, indices=[1, 4])
    assert np.array_equal(a, b)


def test_decoder_threads_change_no_frame():
    data = make_clip("h264", 320, 240, 30, fps=30)
    one, _ = load_video(data, threads=1)
    two, _ = load_video(data, threads=2)
    assert np.array_equal(one, two)


def test_a_corrupted_stream_decodes_as_the_loader_decodes_it(tmp_path):
    """Damaged packets in the middle: FFmpeg conceals them the same way for both readers."""
    data = bytearray(make_clip("h264", 160, 96, 24, fps=12))
    rng = np.random.default_rng(1)
    for pos in rng.integers(len(data) // 3, 2 * len(data) // 3, 40):
        data[pos] ^= 0x5A
    try:
        got, _ = load_video(bytes(data), indices=list(range(24)))
    except InvalidVideoError:
        return  # refused with a typed error is fine too
    ref, _ = _reference(tmp_path, bytes(data), list(range(24)))
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_truncated_mp4_is_refused(cut):
    data = make_clip("h264", 160, 96, 24, fps=12)  # its index (moov) is at the end
    with pytest.raises(InvalidVideoError):
        load_video(data[:int(len(data) * cut)])


def test_truncated_webm_gives_the_frames_it_holds():
    data = make_clip("vp9", 128, 72, 30, fps=15)
    cut = data[:len(data) * 2 // 3]
    every = _every_frame(cut)
    try:
        got, meta = load_video(cut)
    except InvalidVideoError:
        return
    assert np.array_equal(got, every[:len(got)])
    assert meta["total_num_frames"] >= len(got)


@pytest.mark.parametrize("junk", [b"", b"\x00" * 100, b"not a video at all" * 50,
                                  bytes(range(256)) * 40])
def test_garbage_is_refused(junk):
    with pytest.raises(InvalidVideoError):
        load_video(junk)


def test_an_image_is_not_a_video():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (9, 9, 9)).save(buf, "PNG")
    with pytest.raises(InvalidVideoError):
        load_video(buf.getvalue())


def test_codec_outside_the_allowlist_is_unsupported():
    data = make_clip("mpeg4", 64, 48, 4, fps=4)
    with pytest.raises(UnsupportedVideoError, match="codec 'mpeg4'"):
        open_video(0, data, VideoLimits(codecs=frozenset({"h264"})))


def test_a_codec_tag_ffmpeg_does_not_know_is_unsupported():
    data = make_clip("h264", 64, 48, 4).replace(b"avc1", b"zzzz")  # the MP4 sample entry's tag
    with pytest.raises(UnsupportedVideoError, match="unknown to FFmpeg"):
        open_video(0, data)


def test_damaged_webm_raises_only_typed_errors():
    """Random byte damage (some breaks the rewind after counting): frames or InvalidVideoError."""
    import random

    data = make_clip("vp9", 64, 48, 40, fps=10)
    for seed in range(300):
        rng = random.Random(seed)
        damaged = bytearray(data)
        for _ in range(8):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            load_video(bytes(damaged))
        except InvalidVideoError:
            pass


@pytest.mark.parametrize("limits, match", [
    (VideoLimits(max_frames=10), "frames"),
    (VideoLimits(max_duration_s=1.0), "limit of 1 s"),
    (VideoLimits(max_frame_pixels=64 * 48 - 1), "pixels"),
    (VideoLimits(max_side=63), "pixels or 63 per side"),
    (VideoLimits(max_bytes=100), "bytes"),
])
def test_header_limits_refuse_before_decoding(limits, match):
    data = make_clip("h264", 64, 48, 24, fps=12)
    with pytest.raises(InvalidVideoError, match=match):
        open_video(0, data, limits)


def test_8k_frames_are_refused_by_default():
    data = make_clip("h264", 7680, 4320, 1, fps=1, options={"preset": "ultrafast"})
    with pytest.raises(InvalidVideoError, match="7680x4320"):
        open_video(0, data)


def test_counting_packets_stops_at_the_frame_limit():
    data = make_clip("vp9", 32, 32, 40, fps=10)
    with pytest.raises(InvalidVideoError, match="more than 20 frames"):
        open_video(0, data, VideoLimits(max_frames=20))


@pytest.mark.parametrize("codec", ["h264", "hevc"])
@pytest.mark.parametrize("indices", [[0, 5, 11, 23], [1, 2, 3], [22], [4, 9, 13, 18, 23],
                                     list(range(0, 48, 3))])
def test_skipping_non_reference_frames_changes_no_kept_frame(tmp_path, codec, indices):
    """B-frames (x264 / x265 choose them on this smooth pan) not sampled are never decoded."""
    data = make_clip(codec, 192, 108, 48, fps=24)
    header = open_video(0, data)
    try:
        from smg_fast.video.skip_decode import iter_packets, plan_skips

        rank = plan_skips(header)
        order = [rank[p.pts] for p in iter_packets(header)]
        assert order != sorted(order)  # B-frames: reordered
    finally:
        header.close()
    ref, _ = _reference(tmp_path, data, indices)
    got, _ = load_video(data, indices=indices)
    plain, _ = load_video(data, indices=indices, skip=False)
    assert np.array_equal(got, ref) and np.array_equal(plain, ref)


@pytest.mark.parametrize("codec", ["h264", "hevc"])
@pytest.mark.parametrize("indices", [[0, 5, 11, 23], [22], [4, 9, 13, 18, 23, 47],
                                     list(range(0, 48, 3))])
def test_the_skip_decode_on_frame_threads_keeps_the_loaders_frames(tmp_path, monkeypatch,
                                                                     codec, indices):
    """One IDR group on 2 threads: the skip decode runs on frame threads, with the loader's frames.

    It decodes fewer frames than the stream holds up to the last kept one."""
    from smg_fast.video import decode as decode_mod

    runs: list[tuple[str, int, int]] = []
    real = decode_mod.decode_skipping

    def counted(header, wanted, rank, **kw):
        ctx = kw["stream"].codec_context
        seen = {"out": 0}

        def sizes(i, frame, keep):
            seen["out"] += 1
            kw_sizes(i, frame, keep)

        kw_sizes = kw["sizes"]
        got = real(header, wanted, rank, **{**kw, "sizes": sizes})
        runs.append((ctx.thread_type.name, ctx.thread_count, seen["out"]))
        return got

    monkeypatch.setattr(decode_mod, "decode_skipping", counted)
    data = make_clip(codec, 192, 108, 48, fps=24)
    ref, _ = _reference(tmp_path, data, indices)
    got, _ = load_video(data, indices=indices, threads=2)
    assert np.array_equal(got, ref)
    assert len(runs) == 1 and runs[0][:2] == ("AUTO", 2)
    assert runs[0][2] < indices[-1] + 1  # non-reference frames not kept were skipped


def test_skipping_decodes_fewer_frames():
    """With every other frame dropped, FFmpeg decodes fewer frames than the stream holds."""
    from smg_fast.video.skip_decode import decode_skipping, iter_packets, plan_skips

    data = make_clip("h264", 192, 108, 48, fps=24)
    header = open_video(0, data)
    try:
        rank = plan_skips(header)
        packets = list(iter_packets(header))
        decoded = []
        ctx = header.stream.codec_context
        for p in packets:
            ctx.skip_frame = "DEFAULT" if rank[p.pts] % 8 == 0 else "NONREF"
            decoded += ctx.decode(p)
        decoded += ctx.decode(None)
        assert 6 <= len(decoded) < 48
        got = decode_skipping(header, list(range(0, 48, 8)), rank)
        assert [i for i, _ in got] == list(range(0, 48, 8))
    finally:
        header.close()


def _refs(objects: list) -> list[int]:
    """Each object's reference count, taken the same way wherever it is compared."""
    return [sys.getrefcount(o) for o in objects]


@pytest.mark.parametrize("indices", [[0, 300, 599], [7, 450]])
def test_skip_decoding_holds_one_packet_at_a_time(indices):
    """A long clip sampled sparsely: the plan keeps pts, decoding drops each packet once fed.

    The packets are watched as they are handed out: at each hand-out, those still referenced
    by anything but the watcher are counted (at most the one being decoded)."""
    from smg_fast.video.skip_decode import decode_skipping, iter_packets, plan_skips

    data = make_clip("h264", 64, 48, 600, fps=30)
    header = open_video(0, data)
    try:
        rank = plan_skips(header)
        assert len(rank) == 600 and all(isinstance(t, int) for t in rank)
        seen: list = []
        counts: list[list[int]] = []

        def watched():
            for packet in iter_packets(header):
                counts.append(_refs(seen))
                seen.append(packet)
                yield packet

        got = decode_skipping(header, indices, rank, watched())
        assert [i for i, _ in got] == indices
        baseline = _refs(seen)  # decoding is over: only the watcher holds them now
        held = [sum(c > b for c, b in zip(row, baseline, strict=False)) for row in counts]
        assert max(held) <= 1, max(held)
        assert len(seen) < 600 or indices[-1] == 599  # demuxing stops after the last one
    finally:
        header.close()


@pytest.mark.parametrize("codec", [c for c in ("h264", "hevc") if c in ENCODABLE])
@pytest.mark.parametrize("threads", [None, 2])
@pytest.mark.parametrize("indices", [[1, 5, 9, 20, 30, 44], [5, 9, 20, 30, 44]])
def test_frames_an_edit_list_drops_are_not_counted(tmp_path, codec, threads, indices):
    """Frame i is the decoder's i-th output frame, as in transformers' loader, past an edit list.

    The frames the edit list cuts are demuxed (their packets flagged discard), never output."""
    gops = {"h264": {"x264-params": "keyint=12:min-keyint=12:scenecut=0"},
            "hevc": {"x265-params": "keyint=12:min-keyint=12:scenecut=0:open-gop=0:"
                                    "log-level=none"}}[codec]
    data = trimmed_clip(make_clip(codec, 160, 96, 48, fps=12, options=gops), 3)
    with av.open(io.BytesIO(data)) as c:
        flags = [p.is_discard for p in c.demux(video=0) if p.size]
    assert sum(flags) == 3 and len(flags) == 48
    decoded = _every_frame(data)
    assert len(decoded) == 45
    ref, _ = _reference(tmp_path, data, indices)
    got, _ = load_video(data, indices=indices, threads=threads)
    assert np.array_equal(ref, decoded[indices])
    assert np.array_equal(got, ref)
