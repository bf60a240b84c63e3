"""Containers opened without FFmpeg's probe decode give what FFmpeg's default open gives.

The oracle is PyAV's default ``av.open`` (FFmpeg probing as it does by default): the same stream
facts (size, frame count, rates, timings) and, decoded, the same frames (pixels, timestamps,
picture types) in the same order, for H.264 streams whose header lets the probe decode be skipped
and for the streams opened as usual. What the probe copies from its decoder (pixel format, colour
and aspect fields, reorder delay) is unset until a frame is decoded: named here, checked equal
after decoding.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from smg_fast.testing.video_clips import codecs_available, make_clip
from smg_fast.video import load_video, open_video
from smg_fast.video.h264_sps import avcc_sps, parse_sps

av = pytest.importorskip("av")

H264 = "h264" in codecs_available()


def remux(data: bytes, fmt: str) -> bytes:
    """The clip's packets in another container, not re-encoded."""
    buf = io.BytesIO()
    with av.open(io.BytesIO(data)) as src, av.open(buf, "w", format=fmt) as out:
        ins = src.streams.video[0]
        stream = out.add_stream_from_template(ins)
        for packet in src.demux(ins):
            if packet.dts is None:
                continue
            packet.stream = stream
            out.mux(packet)
    return buf.getvalue()


# Filled by FFmpeg's probe from its decoder; an unprobed stream's decoder sets them on its first
# frame, except the stream's own aspect ratio, which stays unset (nothing in smg-fast or the
# loaders it matches reads it). Nothing smg-fast returns reads them before decoding.
FROM_THE_PROBE = ("format", "sample_aspect_ratio", "stream_sample_aspect_ratio", "color_range",
                  "colorspace", "color_primaries", "color_trc", "has_b_frames")


def facts(container) -> dict:
    s = container.streams.video[0]
    ctx = s.codec_context
    fmt = ctx.format
    return {"codec": ctx.name, "width": s.width, "height": s.height, "frames": s.frames,
            "average_rate": s.average_rate, "guessed_rate": s.guessed_rate,
            "base_rate": s.base_rate, "time_base": s.time_base, "start_time": s.start_time,
            "duration": s.duration, "container_duration": container.duration,
            "profile": ctx.profile, "format": fmt.name if fmt is not None else None,
            "sample_aspect_ratio": ctx.sample_aspect_ratio,
            "stream_sample_aspect_ratio": s.sample_aspect_ratio,
            "color_range": int(ctx.color_range), "colorspace": int(ctx.colorspace),
            "color_primaries": int(ctx.color_primaries), "color_trc": int(ctx.color_trc),
            "has_b_frames": ctx.has_b_frames}


def without_probe_fields(f: dict) -> dict:
    return {k: v for k, v in f.items() if k not in FROM_THE_PROBE}


def decoded(container) -> list[tuple]:
    return [(f.pts, int(f.pict_type), int(f.color_range), int(f.colorspace),
             f.to_ndarray(format="rgb24")) for f in container.decode(container.streams.video[0])]


def same_frames(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    return all(x[:4] == y[:4] and np.array_equal(x[4], y[4]) for x, y in zip(a, b, strict=True))


CLIPS = {
    # (x264 params, pixel format, container, size) -> whether the probe decode is skipped
    "b-frames, mp4": ({"x264-params": "bframes=3:b-pyramid=normal"}, "yuv420p", "mp4",
                      (176, 144), True),
    "no b-frames, mp4": ({"x264-params": "bframes=0"}, "yuv420p", "mp4", (176, 144), True),
    "cropped (98x62 of 112x64)": ({}, "yuv420p", "mp4", (98, 62), True),
    "in-band SPS, the avcC's own": ({"x264-params": "repeat-headers=1"}, "yuv420p", "mp4",
                                    (176, 144), True),
    "full range, SAR 4:3, BT.709 (VUI)": (
        {"x264-params": "fullrange=on:sar=4/3:colorprim=bt709:transfer=bt709:colormatrix=bt709"},
        "yuv420p", "mp4", (176, 144), True),
    "b-frames, matroska (its timings come from the probe)": (
        {"x264-params": "bframes=2"}, "yuv420p", "matroska", (176, 144), False),
    "b-frames, mov": ({}, "yuv420p", "mov", (176, 144), True),
    "scaling lists (cqm=jvt)": ({"x264-params": "cqm=jvt:bframes=2"}, "yuv420p", "mp4",
                                (176, 144), True),
    "4:4:4": ({}, "yuv444p", "mp4", (176, 144), False),
    "10-bit": ({}, "yuv420p10le", "mp4", (176, 144), False),
    "interlaced": ({"x264-params": "interlaced=1"}, "yuv420p", "mp4", (176, 144), False),
    "MPEG-TS (Annex B, no avcC)": ({}, "yuv420p", "mpegts", (176, 144), False),
}


def assert_opens_as_default(data: bytes, skipped: bool, frames: int) -> None:
    """open_video's container: FFmpeg's default open's facts and frames; probe skipped or not."""
    header = open_video(0, data)
    try:
        with av.open(io.BytesIO(data)) as ref:
            want_facts = facts(ref)
            assert header.probe_skipped == skipped
            got_facts = facts(header.container)
            if skipped:
                assert without_probe_fields(got_facts) == without_probe_fields(want_facts)
                assert got_facts["format"] is None
            else:
                assert got_facts == want_facts
            # The pixel format planned from the header is the one FFmpeg's probe finds.
            assert header.pixel_format == want_facts["format"]
            want = decoded(ref)
            after = facts(ref)
        got = decoded(header.container)
        assert len(want) == frames
        assert same_frames(got, want)
        now = facts(header.container)  # the decoder has set what the probe would
        if skipped:
            assert now.pop("stream_sample_aspect_ratio") is None
            after.pop("stream_sample_aspect_ratio")
        assert now == after
    finally:
        header.close()


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
@pytest.mark.parametrize("name", list(CLIPS))
def test_open_equals_ffmpegs_default_open(name):
    options, pix_fmt, fmt, (width, height), skipped = CLIPS[name]
    data = make_clip("h264", width, height, 14, fps=24, pix_fmt=pix_fmt, options=options)
    if fmt != "mp4":
        data = remux(data, fmt)
    assert_opens_as_default(data, skipped, 14)


def _sample_entry(data: bytes) -> int:
    """Offset of the avc1 sample entry's width field (then its height) in an MP4."""
    at = data.index(b"stsd") + 4 + 4 + 4 + 4  # version and flags, entry_count, the entry's size
    assert data[at:at + 4] == b"avc1"
    return at + 4 + 6 + 2 + 2 + 2 + 12  # reserved, data_reference_index, pre_defined, reserved...


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
@pytest.mark.parametrize("size", [(192, 144), (176, 160), (96, 64), (176, 136)])
def test_a_sample_entry_size_the_sps_does_not_give_is_probed(size):
    """The SPS says 176x144; the sample entry says otherwise: FFmpeg's probe decides the size.

    (176x136 is within the SPS's macroblocks: FFmpeg then crops the frames to the entry's size.)"""
    data = bytearray(make_clip("h264", 176, 144, 10, fps=24))
    at = _sample_entry(data)
    assert int.from_bytes(data[at:at + 2], "big") == 176
    data[at:at + 4] = size[0].to_bytes(2, "big") + size[1].to_bytes(2, "big")
    assert_opens_as_default(bytes(data), False, 10)
    got, _ = load_video(bytes(data), [0, 5, 9])
    with av.open(io.BytesIO(bytes(data))) as ref:
        every = [f.to_ndarray(format="rgb24") for f in ref.decode(video=0)]
    assert np.array_equal(got, np.stack([every[i] for i in (0, 5, 9)]))


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_a_first_picture_with_another_sps_is_probed():
    """96x64 packets carrying their own SPS, under another stream's 128x64 avcC and entry."""
    inner = make_clip("h264", 96, 64, 8, fps=12, options={"x264-params": "repeat-headers=1"})
    outer = make_clip("h264", 128, 64, 2, fps=12)
    buf = io.BytesIO()
    with av.open(io.BytesIO(inner)) as src, av.open(io.BytesIO(outer)) as tpl, \
            av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream_from_template(tpl.streams.video[0])
        stream.time_base = src.streams.video[0].time_base
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is None:
                continue
            packet.stream = stream
            out.mux(packet)
    data = buf.getvalue()
    with av.open(io.BytesIO(data)) as ref:
        assert (ref.streams.video[0].width, ref.streams.video[0].height) == (96, 64)
    assert_opens_as_default(data, False, 8)
    got, _ = load_video(data, [0, 7])
    assert got.shape == (2, 64, 96, 3)


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_hevc_and_vp9_are_probed_as_usual():
    for codec in ("hevc", "vp9"):
        if codec not in codecs_available():
            continue
        data = make_clip(codec, 96, 64, 6, fps=12)
        header = open_video(0, data)
        try:
            with av.open(io.BytesIO(data)) as ref:
                assert facts(header.container) == facts(ref)
                assert header.stream.codec_context.format is not None
                assert header.pixel_format == ref.streams.video[0].codec_context.format.name
        finally:
            header.close()


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_rotation_is_kept_without_the_probe():
    """The display matrix is the demuxer's: the unprobed stream's frames carry it.

    Each decoder's turn of rotated frames is compared with its reference in test_video_decoders."""
    data = make_clip("h264", 98, 62, 4, rotation=90)
    with av.open(io.BytesIO(data)) as ref:
        assert next(ref.decode(video=0)).rotation == 90
    header = open_video(0, data)
    try:
        assert header.probe_skipped
        assert next(header.container.decode(header.stream)).rotation == 90
    finally:
        header.close()


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_sps_fields_of_x264_streams():
    def sps_of(options: dict, pix_fmt: str = "yuv420p"):
        data = make_clip("h264", 96, 64, 6, fps=12, pix_fmt=pix_fmt, options=options)
        with av.open(io.BytesIO(data)) as c:
            return avcc_sps(c.streams.video[0].codec_context.extradata)

    plain = sps_of({"x264-params": "bframes=0"})
    assert (plain.chroma_format_idc, plain.bit_depth_luma, plain.frame_mbs_only) == (1, 8, True)
    assert plain.bitstream_restriction and plain.max_num_reorder_frames == 0
    assert plain.states_decoder_setup
    pyramid = sps_of({"x264-params": "bframes=3:b-pyramid=normal"})
    assert pyramid.max_num_reorder_frames == 2 and pyramid.states_decoder_setup
    full = sps_of({}, "yuv444p")
    assert full.chroma_format_idc == 3 and not full.states_decoder_setup
    interlaced = sps_of({"x264-params": "interlaced=1"})
    assert not interlaced.frame_mbs_only and not interlaced.states_decoder_setup


def _sps_nal(payload_bits: str) -> bytes:
    bits = payload_bits + "1"  # rbsp_stop_one_bit
    bits += "0" * (-len(bits) % 8)
    return bytes([0x67]) + int(bits, 2).to_bytes(len(bits) // 8, "big")


def _ue(v: int) -> str:
    code = bin(v + 1)[2:]
    return "0" * (len(code) - 1) + code


# Baseline profile 66, level 30, no VUI: nothing says how deep the decoder reorders.
_BASELINE_NO_VUI = ("01000010" + "11000000" + "00011110" + _ue(0) + _ue(0) + _ue(0) + _ue(0)
                    + _ue(1) + "0" + _ue(10) + _ue(8) + "1" + "1" + "0" + "0")


def test_sps_without_vui_does_not_state_the_reorder_depth():
    sps = parse_sps(_sps_nal(_BASELINE_NO_VUI))
    assert (sps.profile_idc, sps.chroma_format_idc, sps.frame_mbs_only) == (66, 1, True)
    assert not sps.bitstream_restriction and sps.max_num_reorder_frames is None
    assert not sps.states_decoder_setup


def _escape(rbsp: bytes) -> bytes:
    """The NAL unit bytes of an RBSP: 03 inserted after 00 00 where 00-03 follows (7.4.1)."""
    out, zeros = bytearray(), 0
    for b in rbsp:
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def test_emulation_prevention_bytes_are_removed():
    """VUI timing with num_units_in_tick 1: its zero bytes need 00 00 03 in the NAL unit."""
    bits = ("01000010" + "00000000" + "00011110" + _ue(0) + _ue(0) + _ue(0) + _ue(0) + _ue(1)
            + "0" + _ue(10) + _ue(8) + "1" + "1" + "0" + "1" + "0000" + "1"
            + format(1, "032b") + format(50, "032b") + "1" + "000" + "1" + "1" + _ue(0) * 4
            + _ue(0) + _ue(1))
    plain = _sps_nal(bits)
    nal = plain[:1] + _escape(plain[1:])
    assert len(nal) > len(plain)  # escaped
    sps = parse_sps(nal)
    assert (sps.profile_idc, sps.chroma_format_idc, sps.frame_mbs_only) == (66, 1, True)
    assert sps.bitstream_restriction and sps.max_num_reorder_frames == 0
    assert sps.cropped_size == (176, 144)
    with pytest.raises(ValueError):
        parse_sps(plain)  # unescaped: 00 00 00 is where FFmpeg ends the NAL unit
    with pytest.raises(ValueError):
        parse_sps(nal[:1])  # no payload at all


@pytest.mark.parametrize("field", [
    "sps_id 32", "poc_type 3", "log2_max_frame_num 13", "refs 17",
])
def test_sps_values_ffmpeg_refuses_are_refused(field):
    sps_id, poc, frame_num, refs = 0, 0, 0, 1
    name, value = field.rsplit(" ", 1)
    if name == "sps_id":
        sps_id = int(value)
    elif name == "poc_type":
        poc = int(value)
    elif name == "log2_max_frame_num":
        frame_num = int(value)
    else:
        refs = int(value)
    bits = ("01000010" + "00000000" + "00011110" + _ue(sps_id) + _ue(frame_num) + _ue(poc)
            + (_ue(0) if poc == 0 else "") + _ue(refs) + "0" + _ue(10) + _ue(8) + "11" + "0"
            + "0")
    with pytest.raises(ValueError):
        parse_sps(_sps_nal(bits))
    ok = ("01000010" + "00000000" + "00011110" + _ue(0) + _ue(0) + _ue(0) + _ue(0) + _ue(1)
          + "0" + _ue(10) + _ue(8) + "11" + "0" + "0")
    assert parse_sps(_sps_nal(ok)).cropped_size == (176, 144)


@pytest.mark.parametrize("extradata", [
    b"", None, b"\x00\x00\x00\x01\x67\x42", b"\x01\x42\x00\x1e\xff\xe2\x00\x04abcd",
    b"\x01\x42\x00\x1e\xff\xe1\x00\x40\x67",  # declares 64 bytes, holds 1
    b"\x01\x42\x00\x1e\xff\xe1\x00\x02\x67\x42",  # an SPS cut after its profile
])
def test_avcc_records_not_read_are_none(extradata):
    assert avcc_sps(extradata) is None


def test_overlong_exp_golomb_is_refused():
    with pytest.raises(ValueError):
        parse_sps(bytes([0x67, 0x64, 0x00, 0x1e]) + bytes(8) + b"\x01")


def _high_with_restriction(profile: int = 100, reorder: int = 2, end: str | None = None) -> str:
    """A High-profile SPS's bits with a VUI holding only bitstream_restriction."""
    head = (format(profile, "08b") + "00000000" + "00011110" + _ue(0) + _ue(1) + _ue(0) + _ue(0)
            + "0" + "0" + _ue(0) + _ue(0) + _ue(0) + _ue(1) + "0" + _ue(10) + _ue(8) + "1" + "1"
            + "0" + "1" + "0" * 8 + "1" + "1" + _ue(0) * 4 + _ue(reorder))
    return head + (_ue(reorder) if end is None else end)  # max_dec_frame_buffering


def test_a_high_profile_sps_with_its_reorder_depth_states_the_setup():
    sps = parse_sps(_sps_nal(_high_with_restriction()))
    assert sps.states_decoder_setup and sps.max_num_reorder_frames == 2
    assert sps.cropped_size == (176, 144) and not sps.full_range


def test_an_sps_cut_before_its_last_field_is_refused():
    """The stop bit is not data: read as max_dec_frame_buffering it would pass the SPS."""
    with pytest.raises(ValueError):
        parse_sps(_sps_nal(_high_with_restriction(end="")))


@pytest.mark.parametrize("profile, reorder", [(144, 2), (139, 2), (100, 17)])
def test_sps_fields_ffmpeg_reads_otherwise_are_refused(profile, reorder):
    with pytest.raises(ValueError):
        parse_sps(_sps_nal(_high_with_restriction(profile, reorder)))


def _avcc(sps: list[bytes], pps: list[bytes], like: bytes) -> bytes:
    """An avcC record with these parameter sets, the rest (profile, level, lengths) as in like."""
    out = bytearray(like[:5]) + bytes([0xE0 | len(sps)])
    for nal in sps:
        out += len(nal).to_bytes(2, "big") + nal
    out.append(len(pps))
    for nal in pps:
        out += len(nal).to_bytes(2, "big") + nal
    return bytes(out)


def _parameter_sets(extradata: bytes) -> tuple[list[bytes], list[bytes]]:
    sets: list[list[bytes]] = [[], []]
    at, count = 6, extradata[5] & 0x1F
    for kind in (0, 1):
        for _ in range(count):
            size = int.from_bytes(extradata[at:at + 2], "big")
            sets[kind].append(extradata[at + 2:at + 2 + size])
            at += 2 + size
        if kind == 0:
            count, at = extradata[at], at + 1
    return sets[0], sets[1]


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_an_sps_in_the_avcc_pps_list_is_probed():
    """FFmpeg reads each avcC NAL by its type: an SPS in the PPS list replaces the one before."""
    small = make_clip("h264", 176, 144, 2, fps=12, options={"x264-params": "bframes=0"})
    big = make_clip("h264", 352, 288, 6, fps=12, options={"x264-params": "bframes=0"})
    with av.open(io.BytesIO(small)) as c:
        small_sps, _ = _parameter_sets(bytes(c.streams.video[0].codec_context.extradata))
    buf = io.BytesIO()
    with av.open(io.BytesIO(big)) as src, av.open(buf, "w", format="mp4") as out:
        ins = src.streams.video[0]
        big_extra = bytes(ins.codec_context.extradata)
        big_sps, big_pps = _parameter_sets(big_extra)
        stream = out.add_stream_from_template(ins)
        stream.codec_context.extradata = _avcc(small_sps, big_sps + big_pps, big_extra)
        stream.codec_context.width, stream.codec_context.height = 176, 144
        for packet in src.demux(ins):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    data = buf.getvalue()
    with av.open(io.BytesIO(data)) as c:
        extra = bytes(c.streams.video[0].codec_context.extradata)
        assert avcc_sps(_avcc(*_parameter_sets(extra), extra)) is None
        assert (c.streams.video[0].width, c.streams.video[0].height) == (352, 288)
    assert_opens_as_default(data, False, 6)


@pytest.mark.skipif(not H264, reason="this PyAV build has no libx264")
def test_another_sps_in_a_later_packet_is_probed():
    """A 4:4:4 SPS in the third packet (FFmpeg's probe decodes that far): the probe decides."""
    options = {"x264-params": "bframes=0:keyint=2:repeat-headers=1"}
    first = make_clip("h264", 96, 64, 2, fps=12, options=options)
    later = make_clip("h264", 96, 64, 4, fps=12, pix_fmt="yuv444p", options=options)
    buf = io.BytesIO()
    with av.open(io.BytesIO(first)) as a, av.open(io.BytesIO(later)) as b, \
            av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream_from_template(a.streams.video[0])
        n = 0
        for src in (a, b):
            for packet in src.demux(src.streams.video[0]):
                if packet.dts is None:
                    continue
                packet.stream = stream
                packet.pts = packet.dts = n * packet.duration
                out.mux(packet)
                n += 1
    data = buf.getvalue()
    assert_opens_as_default(data, False, 6)
