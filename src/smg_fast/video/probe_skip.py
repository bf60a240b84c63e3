"""Opening an H.264 MP4 without FFmpeg's probe decode where its header says what that decode learns.

Opening a container, FFmpeg decodes each stream's first frames to fill in what the header leaves
out (the pixel format, H.264's reorder depth, the colour and aspect fields); the keyframe it
decodes is decoded again with the frames. A file that starts as MP4 / MOV does is first opened
with every decoder refused for that probe (``codec_whitelist``: the decoder that later decodes the
frames is made from the stream's parameters, without it), and kept when its first video stream is
H.264 whose header states all the frames depend on (``h264_sps.py``): the avcC's one SPS states
8-bit 4:2:0 progressive frames and their reorder depth, its size cropped on the right and bottom
only is the sample entry's, the first packet is an IDR picture, and no SPS but that one is in the
first packets (more than the probe decodes). Then the decoded frames, the frame count, rate,
timings and rotation are the default open's; the stream's colour, aspect and format fields stay
unset until a frame is decoded. Other demuxers estimate stream timings from the probe
(Matroska's start time and duration differ without it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .h264_sps import Sps, avcc_sps, uses_avcc_sps

# A decoder option for the probe of the first _PROBED_STREAMS streams: no decoder may open.
_NO_PROBE_DECODE = {"codec_whitelist": "none"}
_PROBED_STREAMS = 32
# The first box of an MP4 / MOV file (ISO/IEC 14496-12; QuickTime's may come before ftyp).
_MP4_BOXES = frozenset({b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide"})
SNIFF_BYTES = 8
# Packets whose in-band SPSs are compared with the avcC's: more than FFmpeg's probe decodes.
_SCANNED_PACKETS = 32


def open_unprobed(make_file: Callable[[], Any], head: bytes) -> Any | None:
    """PyAV's container on make_file() opened without the probe decode, or None where it must run.

    ``head``: the file's first ``SNIFF_BYTES`` (anything but an MP4 / MOV box is not tried)."""
    if head[4:8] not in _MP4_BOXES:
        return None
    import av

    try:
        with av.logging.Capture(local=True):  # FFmpeg logs the refused decoders as errors
            container = av.open(make_file(), mode="r", metadata_errors="ignore",
                                stream_options=[_NO_PROBE_DECODE] * _PROBED_STREAMS)
    except (av.FFmpegError, ValueError):
        return None  # the default open says what is wrong
    try:
        needless = probe_decode_needless(container)
    except BaseException:
        container.close()
        raise
    if not needless:
        container.close()
        return None
    return container


def probe_decode_needless(container: Any) -> bool:
    """True for an MP4 / MOV whose first video stream is H.264 stating what the probe learns."""
    import av

    video = container.streams.video
    if "mp4" not in container.format.name.split(",") or not video:
        return False
    stream = video[0]
    ctx = stream.codec_context
    if stream.index >= _PROBED_STREAMS or ctx is None or ctx.name != "h264":
        return False
    extradata = bytes(ctx.extradata or b"")
    sps = avcc_sps(extradata)
    if sps is None or not sps.states_decoder_setup:
        return False
    if sps.cropped_size != (stream.width, stream.height):
        return False
    try:
        n = 0
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            first = n == 0
            if first and not packet.is_keyframe:
                return False
            if not uses_avcc_sps(extradata, bytes(packet), idr=first):
                return False
            n += 1
            if n == _SCANNED_PACKETS:
                break
        container.seek(0)
    except av.FFmpegError:
        return False
    return n > 0


def sps_pixel_format(stream: Any) -> str | None:
    """FFmpeg's pixel format of an unprobed H.264 stream's frames, from its avcC's SPS."""
    sps: Sps | None = avcc_sps(bytes(stream.codec_context.extradata or b""))
    if sps is None or not sps.states_decoder_setup:
        return None
    return "yuvj420p" if sps.full_range else "yuv420p"


__all__ = ["SNIFF_BYTES", "open_unprobed", "probe_decode_needless", "sps_pixel_format"]
