"""A video's metadata as torchcodec's exact seek mode reads it: from a scan of its packets.

transformers' video processors sample a path or URL's frames from torchcodec's metadata
(``VideoDecoder(seek_mode="exact")``), which counts the stream's packets and measures it from
their timestamps rather than reading the container header: ``num_frames`` is the packet count,
the stream runs from the smallest pts to the largest pts + duration, ``duration_seconds`` is
that span and ``average_fps`` the count over it. A WebM clip whose header says 24 fps can
measure 24.05 fps this way, which changes which frames fps sampling keeps. Demuxing only.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidVideoError, UnsupportedVideoError
from .container import VideoHeader, _av, open_again


def scanned_metadata(header: VideoHeader) -> dict[str, Any]:
    """``VideoMetadata`` fields as transformers' torchcodec reader fills them, from a scan."""
    av = _av()
    container, stream = header.container, header.stream
    count, begin, end = 0, None, None
    try:
        container.seek(0)
        for packet in container.demux(stream):
            if packet.size == 0 or packet.is_discard:
                continue
            ts = packet.pts if packet.pts is not None else packet.dts
            if ts is None:
                continue
            count += 1
            begin = ts if begin is None else min(begin, ts)
            last = ts + (packet.duration or 0)
            end = last if end is None else max(end, last)
        container.seek(0)
    except av.FFmpegError as exc:
        raise InvalidVideoError(header.index, f"corrupt container ({exc})") from None
    if count == 0 or begin is None or end is None:
        raise InvalidVideoError(header.index, "the video stream holds no timed packets")
    tb = stream.time_base
    unit = tb.numerator / tb.denominator if tb else 0.0  # FFmpeg's av_q2d, as torchcodec
    seconds = end * unit - begin * unit
    return {"total_num_frames": count, "fps": count / seconds if seconds > 0 else None,
            "duration": seconds, "video_backend": "torchcodec", "height": header.height,
            "width": header.width}


def stream_rotation(header: VideoHeader) -> int:
    """The stream's display rotation in degrees (0, 90, 180, 270), read off its first frame.

    PyAV exposes the display matrix on decoded frames only, so the first frame is decoded (not
    converted), by a second container on the same source whose decoder runs on one thread and
    is closed at once: the stream's own decoder stays closed (a server plans a video before its
    decode budget is taken, and the thread setting applies when decoding opens it).
    UnsupportedVideoError for an angle that is not a multiple of 90."""
    av = _av()
    src = header.source
    if src is None:
        raise ValueError(f"video {header.index}: the header keeps no source to read again")
    container = open_again(header)  # the file first opened, or InvalidVideoError
    try:
        stream = container.streams[header.stream.index]
        stream.codec_context.thread_count = 1
        stream.codec_context.thread_type = "SLICE"
        frame = next(iter(container.decode(stream)), None)
        angle = int(round(getattr(frame, "rotation", 0) or 0)) if frame is not None else 0
    except av.FFmpegError as exc:
        raise InvalidVideoError(header.index, f"corrupt video stream ({exc})") from None
    finally:
        container.close()
    if angle % 90:
        raise UnsupportedVideoError(header.index, f"display rotation of {angle} degrees (only "
                                                  "multiples of 90 are reproduced)")
    return angle % 360


def frame_size(header: VideoHeader, decoder: str, rotation: int) -> tuple[int, int]:
    """(height, width) of the frames decoder returns: turned upright except by PyAV's loader."""
    if decoder != "pyav" and rotation in (90, 270):
        return header.width, header.height
    return header.height, header.width


def decoder_metadata(header: VideoHeader, decoder: str) -> dict[str, Any]:
    """The metadata a decoder's reader gives: the scan for torchcodec, else the header's.

    torchcodec and OpenCV turn rotated streams upright, so their width and height are the
    upright frame's (as both report them); ``rotation`` is the stream's (0 for pyav)."""
    meta = scanned_metadata(header) if decoder == "torchcodec" else header.metadata()
    meta["video_backend"] = decoder
    rotation = stream_rotation(header) if decoder != "pyav" else 0
    meta["height"], meta["width"] = frame_size(header, decoder, rotation)
    meta["rotation"] = rotation
    return meta


__all__ = ["decoder_metadata", "frame_size", "scanned_metadata", "stream_rotation"]
