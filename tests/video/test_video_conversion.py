"""decoder="pyav" against PyAV's own conversion, the pooled graph's frames, typed refusals.

The clips of test_video_decoders.py, plus 8- and 10-bit sources of every chroma layout, colour
tags that change mid-stream and reserved colour values, each against PyAV's
``to_ndarray(format="rgb24")`` (what transformers' PyAV loader runs)."""

from __future__ import annotations

import numpy as np
import pytest
from test_video_decoders import CLIPS, INDICES

from smg_fast.errors import InvalidVideoError
from smg_fast.testing.video_clips import make_clip
from smg_fast.video import DECODERS, load_video
from smg_fast.video.convert import FrameConverter

pytest.importorskip("av")


def _ts_segment(params: str, seed: int, frames: int = 6) -> bytes:
    """A 64x48 HEVC MPEG-TS segment encoded with these x265 params (none: untagged colour)."""
    import io

    import av

    from smg_fast.testing.video_clips import scene_frame, texture

    picture, buf = texture(128, 96, seed), io.BytesIO()
    with av.open(buf, "w", format="mpegts") as out:
        stream = out.add_stream("libx265", rate=24)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.thread_count = 1
        stream.options = {"x265-params": ":".join(filter(None, (params, "log-level=error")))}
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(scene_frame(picture, 64, 48, i), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def _mpeg4_colour(primaries: int, transfer: int) -> bytes:
    """An MPEG-4 part 2 stream whose visual object header states these colour values.

    A reserved 0 or 3 included: the decoder passes them on to the frames."""
    import io

    import av

    from smg_fast.testing.video_clips import scene_frame, texture

    picture, buf = texture(128, 96), io.BytesIO()
    with av.open(buf, "w", format="m4v") as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(6):
            frame = av.VideoFrame.from_ndarray(scene_frame(picture, 64, 48, i), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    data = buf.getvalue()
    # ISO/IEC 14496-2 visual object: identifier (verid 1, priority 1), type video, then a video
    # signal type with a colour description, then next_start_code's stuffing.
    bits = "1" + "0001" + "001" + "0001" + "1" + "101" + "0" + "1"
    bits += f"{primaries:08b}{transfer:08b}{1:08b}" + "0"
    bits += "1" * (-len(bits) % 8)
    start = data.index(b"\x00\x00\x01\xb5") + 4
    end = data.index(b"\x00\x00\x01", start)
    header = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
    return data[:start] + header + data[end:]


# 8-bit sources (converted through a pooled filter graph where exact), 10-bit ones (PyAV's
# reformat), colour tags that change mid-stream, reserved colour values.
PYAV_EXTRA = {
    "hevc_ts_bt709_then_untagged": (
        _ts_segment("colormatrix=bt709:colorprim=bt709:transfer=bt709", 0)
        + _ts_segment("", 1)),
    "mpeg4_reserved_primaries": _mpeg4_colour(0, 1),
    "mpeg4_reserved_transfer": _mpeg4_colour(1, 3),
    "vp9_444": make_clip("vp9", 98, 62, 6, pix_fmt="yuv444p"),
    "vp9_422": make_clip("vp9", 98, 62, 6, pix_fmt="yuv422p"),
    "h264_422_full": make_clip("h264", 98, 62, 6, pix_fmt="yuvj422p"),
    "h264_444_full": make_clip("h264", 97, 61, 6, pix_fmt="yuvj444p"),
    "h264_smpte240m": make_clip("h264", 98, 62, 6,
                                options={"x264-params": "colormatrix=smpte240m"}),
    "h264_10bit": make_clip("h264", 98, 62, 6, pix_fmt="yuv420p10le"),
    "h264_422_10bit": make_clip("h264", 98, 62, 6, pix_fmt="yuv422p10le"),
}


def _pyav_frames(data: bytes, indices: list[int]) -> np.ndarray:
    """PyAV's own to_ndarray(rgb24) of the listed frames, converted after decoding."""
    import io

    import av

    with av.open(io.BytesIO(data)) as c:
        kept = [f for i, f in enumerate(c.decode(video=0)) if i in set(indices)]
    return np.stack([f.to_ndarray(format="rgb24") for f in kept])


@pytest.mark.parametrize("name", sorted(CLIPS) + sorted(PYAV_EXTRA))
def test_pyav_frames_equal_pyav_own_conversion(name: str) -> None:
    """decoder="pyav" gives PyAV's to_ndarray(format="rgb24") pixels on every pixel format."""
    data = CLIPS.get(name) or PYAV_EXTRA[name]
    indices = INDICES.get(name, [0, 2, 5, 6, 9, 11] if "_ts_" in name else [0, 2, 5])
    want = _pyav_frames(data, indices)
    for skip in (True, False):
        got, _ = load_video(data, indices, skip=skip)
        assert got.shape == want.shape and np.array_equal(got, want), (name, skip)


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_held_frame_keeps_its_pixels(decoder: str) -> None:
    """Frames the caller keeps are never overwritten by later conversions from the pool."""
    import io

    import av

    data = make_clip("h264", 98, 62, 16)
    with av.open(io.BytesIO(data)) as c:
        frames = list(c.decode(video=0))
    convert = FrameConverter(decoder)
    held = [convert(f) for f in frames]
    assert all(not rgb.flags.owndata for rgb in held)  # views of the graph's pooled frames
    for _ in range(2):
        for f in frames:
            convert(f)  # converted and dropped: the pool hands its buffers out again
    for frame, rgb in zip(frames, held, strict=True):  # 8-bit 4:2:0: the three agree
        assert np.array_equal(rgb, frame.to_ndarray(format="rgb24"))


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("pixel_format", ["yuv420p", "yuv420p10le"])
def test_a_frame_ffmpeg_cannot_convert_is_an_invalid_video(decoder, pixel_format,
                                                           monkeypatch) -> None:
    """FFmpeg's error from the RGB conversion is the typed InvalidVideoError naming the video.

    8-bit frames go through a filter graph, others through PyAV's reformat (torchcodec's
    through the graph always): both fail here with an error of FFmpeg's."""
    import av

    from smg_fast.video import convert as convert_module

    def refuse(*_: object) -> None:
        raise av.error.InvalidDataError(1094995529, "Invalid data")

    monkeypatch.setattr(convert_module, "_scale_graph", refuse)

    class Unconvertible:
        width, height, rotation, interlaced_frame = 8, 8, 0, False
        color_range, colorspace, color_trc, color_primaries = 0, 2, 2, 2
        format = type("Format", (), {"name": pixel_format})()

        def to_ndarray(self, **_: object) -> None:
            raise av.error.InvalidDataError(1094995529, "Invalid data")

    convert = FrameConverter(decoder, index=3)
    with pytest.raises(InvalidVideoError, match="video 3.*conversion failed"):
        convert(Unconvertible())


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_matrix_swscale_refuses_is_an_invalid_video_as_in_pyav(decoder) -> None:
    """A YCgCo-tagged frame: the pooled conversion refuses it, typed, as PyAV's to_ndarray does."""
    import io

    import av

    with av.open(io.BytesIO(CLIPS["h264_98x62"])) as c:
        frame = next(iter(c.decode(video=0)))
    frame.colorspace = 8  # AVCOL_SPC_YCGCO
    with pytest.raises(av.FFmpegError):
        frame.to_ndarray(format="rgb24")
    with pytest.raises(InvalidVideoError, match="video 5.*conversion failed"):
        FrameConverter(decoder, index=5)(frame)
