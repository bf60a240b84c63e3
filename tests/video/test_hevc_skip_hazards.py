"""HEVC streams where skipping non-reference pictures could change the frames kept: decoded plainly.

Temporal sub-layers (FFmpeg skips every sub-layer non-reference picture, which pictures of a
higher sub-layer may refer to) and picture parameter sets that let a slice hide its picture
(output_flag_present_flag: a picture decoded and never output, which a count of packets by pts
would not see). Neither plan (the skip decode's, the parallel decode's) takes such a stream; the
frames equal transformers' PyAV loader. And a skip decode whose wanted frame never comes out
gives up (the plain decode then runs) instead of returning fewer frames."""

from __future__ import annotations

import io

import numpy as np
import pytest

from smg_fast.testing.video_clips import codecs_available, make_clip
from smg_fast.video import load_video, open_video
from smg_fast.video.h264_sps import _rbsp
from smg_fast.video.nal_units import hevc_parameter_units, hevc_skip_hazard
from smg_fast.video.parallel_decode import plan_packets
from smg_fast.video.skip_decode import decode_skipping, plan_skips

av = pytest.importorskip("av")
pytestmark = pytest.mark.skipif("hevc" not in codecs_available(), reason="no x265 encoder")

LAYERS = {"x265-params": "log-level=error:bframes=3:b-pyramid=1:temporal-layers=3"}


def _reference(tmp_path, data: bytes, indices: list[int]) -> np.ndarray:
    from transformers.video_utils import load_video as hf_load_video

    path = tmp_path / "clip.mp4"
    path.write_bytes(data)
    frames, _ = hf_load_video(str(path), backend="pyav",
                              sample_indices_fn=lambda metadata, **kw: np.array(indices))
    return frames


@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("indices", [[0, 15, 30, 47], [9, 20], [46], list(range(0, 48, 5))])
def test_temporal_sub_layers_decode_plainly_as_the_loader(tmp_path, threads, indices):
    data = make_clip("hevc", 160, 96, 48, fps=24, options=LAYERS)
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


def test_a_parameter_set_that_lets_pictures_hide_is_a_hazard():
    units = _stream_parameter_sets(make_clip("hevc", 64, 48, 8, fps=8))
    kinds = [(u[0] >> 1) & 0x3F for u in units]
    assert 34 in kinds and hevc_skip_hazard(units) is None
    pps = units[kinds.index(34)]
    flagged = [*units[:kinds.index(34)], _with_output_flag(pps), *units[kinds.index(34) + 1:]]
    assert hevc_skip_hazard(flagged) == "pictures that may not be output"
    assert hevc_skip_hazard([bytes([39 << 1, 1])]) is None  # an SEI header: nothing to say
    assert hevc_skip_hazard([pps[:2]]) == "pictures that may not be output"  # unreadable PPS


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


def test_a_wanted_frame_that_never_comes_out_gives_up():
    data = make_clip("h264", 64, 48, 12, fps=12)
    header = open_video(0, data)
    try:
        rank = plan_skips(header)
        assert rank is not None
        assert decode_skipping(header, [3, len(rank)], rank) is None  # index 12 is no frame's
    finally:
        header.close()
