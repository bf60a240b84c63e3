"""Streams where skipping non-reference pictures could change the frames kept: decoded plainly.

HEVC: temporal sub-layers (FFmpeg skips every sub-layer non-reference picture, which pictures of
a higher sub-layer may refer to), and what makes the decoder output fewer pictures than packets
(which frame indices counted by pts would not see): picture parameter sets that let a slice hide
its picture, BLA pictures and ends of sequence (the next CRA's leading pictures are dropped),
IRAP pictures dropping the pictures not yet output. H.264: field coding and SPSs without a
stated reorder depth. Neither plan (the skip decode's, the parallel decode's) takes such a
stream; the frames equal transformers' PyAV loader. And a skip decode whose wanted frame never
comes out gives up (the plain decode then runs) instead of returning fewer frames."""

from __future__ import annotations

import io

import numpy as np
import pytest

from smg_fast.testing.video_clips import codecs_available, make_clip
from smg_fast.video import load_video, open_video
from smg_fast.video.h264_sps import _rbsp
from smg_fast.video.nal_units import (
    h264_skip_hazard,
    hevc_parameter_units,
    hevc_skip_hazard,
    nal_units,
)
from smg_fast.video.parallel_decode import plan_packets
from smg_fast.video.skip_decode import decode_skipping, plan_skips

av = pytest.importorskip("av")
HEVC = pytest.mark.skipif("hevc" not in codecs_available(), reason="no x265 encoder")

LAYERS = {"x265-params": "log-level=error:bframes=3:b-pyramid=1:temporal-layers=3"}


def _reference(tmp_path, data: bytes, indices: list[int]) -> np.ndarray:
    from transformers.video_utils import load_video as hf_load_video

    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    frames, _ = hf_load_video(str(path), backend="pyav",
                              sample_indices_fn=lambda metadata, **kw: np.array(indices))
    return frames


def _relabelled(data: bytes, mode: str) -> bytes:
    """data (an x265 open-GOP MP4) with each later CRA made BLA_W_LP, or after an end of sequence.

    Mode "bla" relabels the CRA pictures, "eos" puts an end-of-sequence NAL unit before them:
    conforming streams whose CRAs' leading pictures the decoder drops."""
    buf = io.BytesIO()
    changed = 0
    with av.open(io.BytesIO(data)) as src, av.open(buf, "w", format="mp4") as out:
        stream = src.streams.video[0]
        dst = out.add_stream_from_template(stream)
        first = True
        for packet in src.demux(stream):
            if packet.dts is None:
                continue
            data_ = bytes(packet)
            units = nal_units(data_, 4)
            if not first and 21 in [(u[0] >> 1) & 0x3F for u in units]:
                changed += 1
                if mode == "bla":
                    data_ = b"".join(len(u).to_bytes(4, "big")
                                     + (bytes([16 << 1 | u[0] & 1]) + u[1:]
                                        if (u[0] >> 1) & 0x3F == 21 else u) for u in units)
                else:
                    data_ = (2).to_bytes(4, "big") + bytes([36 << 1, 1]) + data_
            first = False
            out_packet = av.Packet(data_)
            out_packet.pts, out_packet.dts = packet.pts, packet.dts
            out_packet.time_base, out_packet.is_keyframe = packet.time_base, packet.is_keyframe
            out_packet.stream = dst
            out.mux(out_packet)
    assert changed >= 2
    return buf.getvalue()


def _clip(kind: str) -> bytes:
    if kind == "layers":
        return make_clip("hevc", 160, 96, 48, fps=24, options=LAYERS)
    if kind == "mbaff":
        return make_clip("h264", 160, 96, 48, fps=24,
                         options={"x264-params": "interlaced=1:bframes=2"})
    return _relabelled(make_clip("hevc", 160, 96, 48, fps=24, options=OPEN_GOP), kind)


OPEN_GOP = {"x265-params": "log-level=error:keyint=16:min-keyint=16:bframes=3:open-gop=1:"
                           "scenecut=0"}


@pytest.mark.parametrize("kind", [*(pytest.param(k, marks=HEVC) for k in ("layers", "bla", "eos")),
                                  "mbaff"])
@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("indices", [[0, 15, 30, 37], [9, 20], [36], list(range(0, 38, 5))])
def test_hazardous_streams_decode_plainly_as_the_loader(tmp_path, kind, threads, indices):
    data = _clip(kind)
    header = open_video(0, data)
    try:
        assert plan_skips(header) is None and plan_packets(header) is None
    finally:
        header.close()
    got, _ = load_video(data, indices=indices, threads=threads)
    assert np.array_equal(got, _reference(tmp_path, data, indices))


def _with_output_flag(pps: bytes) -> bytes:
    """An x265 picture parameter set with output_flag_present_flag set.

    Its ids are 0 (bits 1, 1), then dependent_slice_segments_enabled_flag, then the flag."""
    body = bytearray(_rbsp(pps[2:]))
    assert body[0] >> 5 == 0b110  # pps id 0, sps id 0, dependent slices off
    body[0] |= 0x10
    assert b"\x00\x00" not in bytes(body[:4])  # no emulation prevention to redo
    return pps[:2] + bytes(body)


def _stream_parameter_sets(data: bytes) -> list[bytes]:
    with av.open(io.BytesIO(data)) as c:
        return hevc_parameter_units(bytes(c.streams.video[0].codec_context.extradata))


@HEVC
def test_a_parameter_set_that_lets_pictures_hide_is_a_hazard():
    units = _stream_parameter_sets(make_clip("hevc", 64, 48, 8, fps=8))
    kinds = [(u[0] >> 1) & 0x3F for u in units]
    assert 34 in kinds and hevc_skip_hazard(units) is None
    pps = units[kinds.index(34)]
    flagged = [*units[:kinds.index(34)], _with_output_flag(pps), *units[kinds.index(34) + 1:]]
    assert hevc_skip_hazard(flagged) == "pictures that may not be output"
    assert hevc_skip_hazard([bytes([39 << 1, 1])]) is None  # an SEI header: nothing to say
    assert hevc_skip_hazard([pps[:2]]) == "pictures that may not be output"  # unreadable PPS


@HEVC
def test_a_stream_whose_parameter_sets_let_pictures_hide_is_not_planned():
    """The hvcC's PPS says slices may hide their pictures: neither plan takes the stream."""
    data = make_clip("hevc", 64, 48, 8, fps=8)
    buf = io.BytesIO()
    with av.open(io.BytesIO(data)) as src, av.open(buf, "w", format="mp4") as out:
        stream = src.streams.video[0]
        extra = bytes(stream.codec_context.extradata)
        units = hevc_parameter_units(extra)
        pps = next(u for u in units if (u[0] >> 1) & 0x3F == 34)
        dst = out.add_stream_from_template(stream)
        dst.codec_context.extradata = extra.replace(pps, _with_output_flag(pps))
        for packet in src.demux(stream):
            if packet.dts is not None:
                packet.stream = dst
                out.mux(packet)
    header = open_video(0, buf.getvalue())
    try:
        assert plan_skips(header) is None and plan_packets(header) is None
    finally:
        header.close()


def test_an_irap_picture_dropping_pictures_not_yet_output_is_a_hazard():
    """no_output_of_prior_pics_flag, the second bit of an IRAP slice (after first_slice...)."""
    assert hevc_skip_hazard([bytes([19 << 1, 1, 0x80])]) is None  # an IDR slice, flag 0
    assert hevc_skip_hazard([bytes([19 << 1, 1, 0xC0])]) is not None
    assert hevc_skip_hazard([bytes([1 << 1, 1, 0xC0])]) is None  # TRAIL_R: no such flag


def test_h264_parameter_sets_without_a_reorder_depth_are_a_hazard():
    from test_h264_probe_skip import _BASELINE_NO_VUI, _high_with_restriction, _sps_nal

    assert h264_skip_hazard([_sps_nal(_high_with_restriction())]) is None
    assert h264_skip_hazard([_sps_nal(_BASELINE_NO_VUI)]) == "no stated reorder depth"
    assert h264_skip_hazard([bytes([0x67, 0xFF])]) == "an SPS that cannot be read"


def test_a_wanted_frame_that_never_comes_out_gives_up():
    data = make_clip("h264", 64, 48, 12, fps=12)
    header = open_video(0, data)
    try:
        rank = plan_skips(header)
        assert rank is not None
        assert decode_skipping(header, [3, len(rank)], rank) is None  # index 12 is no frame's
    finally:
        header.close()
