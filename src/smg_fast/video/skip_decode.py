"""Decoding fewer frames: non-reference frames that sampling does not keep are never decoded.

A non-reference frame (an H.264 / HEVC frame no other frame predicts from, typically most
B-frames) changes no other frame of a valid stream, so skipping it changes no kept frame (not
so for HEVC of several slice segments a picture, measured with FFmpeg 8.1, nor for a damaged
stream: docs/video.md). FFmpeg skips one when
``skip_frame`` is NONREF while its packet is decoded; it is set per packet, to NONREF for the
frames sampling drops and DEFAULT for the ones it keeps. Skipped frames are not output, so frames
are identified by their presentation timestamp: frame ``i`` (the reference's ``i``-th output
frame) is the one with the ``i``-th smallest pts. That holds when every packet carries one output
frame with a distinct pts (none flagged discard, as an edit list's cut frames are: the decoder
outputs none of them) and the first is IDR (else the decoder drops the frames before a recovery
point or a CRA's leading frames), which ``plan_skips`` checks from the demuxed packets;
otherwise (or for other codecs) the plain decode runs. On frame threads FFmpeg hands each
packet's ``skip_frame`` to the thread that decodes it, so the skip decode runs there too. It
runs on a second container, so that where it gives up the plain decode starts on a fresh
decoder.
Tests compare both with transformers' loader. Packets are never held: the plan keeps their
pts, and decoding demuxes the stream again and drops each packet once the decoder has it (a
packet is the compressed stream's own bytes: a file up to ``VideoLimits.max_bytes`` would
otherwise sit in memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .container import VideoHeader
from .nal_units import (
    avcc_units,
    h264_skip_hazard,
    hevc_parameter_units,
    hevc_skip_hazard,
    is_idr,
    nal_length_size,
    nal_units,
)

SKIPPABLE = frozenset({"h264", "hevc"})


def iter_packets(header: VideoHeader, container: Any = None,
                 stream: Any = None) -> Iterator[Any]:
    """The stream's packets with data in decode order, from the start, one at a time.

    From ``container``'s ``stream`` where given (a second container on the header's source)."""
    container = header.container if container is None else container
    container.seek(0)
    for packet in container.demux(header.stream if stream is None else stream):
        if packet.size:
            yield packet


def skip_hazard(header: VideoHeader, packet: Any, length_size: int) -> str | None:
    """Why skipping non-reference pictures could change the stream's kept pictures, or None.

    From one packet, or with ``packet`` None from the parameter sets of the stream's
    extradata (nal_units.hevc_skip_hazard, h264_skip_hazard)."""
    if header.codec == "hevc":
        if packet is None:
            extra = bytes(header.stream.codec_context.extradata or b"")
            return hevc_skip_hazard(hevc_parameter_units(extra))
        return hevc_skip_hazard(nal_units(bytes(packet), length_size))
    if header.codec == "h264":
        if packet is None:
            return h264_skip_hazard(avcc_units(bytes(header.stream.codec_context.extradata
                                                     or b"")))
        return h264_skip_hazard(nal_units(bytes(packet), length_size))
    return None


def plan_skips(header: VideoHeader) -> dict[int, int] | None:
    """pts -> frame index for every packet of the stream, or None.

    None: the plain decode must run (another codec, packets without one distinct
    pts each, a first picture that is not IDR: FFmpeg drops the frames it cannot show before a
    recovery point or a CRA picture's leading frames, which a count by pts would not see; a
    ``skip_hazard`` in the extradata or a packet: for HEVC several slice segments a picture,
    temporal sub-layers, pictures not output or dropped; for H.264 field coding or no stated
    reorder depth). Demuxes the whole stream once, keeping each packet's pts, never the
    packet."""
    if header.codec not in SKIPPABLE:
        return None
    length_size = nal_length_size(header)
    if skip_hazard(header, None, length_size):
        return None
    pts: list[int] = []
    for packet in iter_packets(header):
        if packet.pts is None or packet.is_discard or len(pts) == header.total_frames:
            return None  # a discard packet (an edit list's): its frame is never output
        if not pts and not is_idr(packet, header.codec, length_size):
            return None  # a recovery point or CRA first: the decoder drops frames before it
        if skip_hazard(header, packet, length_size):
            return None
        pts.append(packet.pts)
    if len(pts) != header.total_frames or len(set(pts)) != len(pts):
        return None
    return {t: i for i, t in enumerate(sorted(pts))}


def decode_skipping(header: VideoHeader, indices: Sequence[int], rank: dict[int, int],
                    packets: Iterable[Any] | None = None,
                    check: Callable[[], None] | None = None,
                    sizes: Callable[[int, Any, bool], None] | None = None,
                    container: Any = None, stream: Any = None
                    ) -> list[tuple[int, Any]] | None:
    """The wanted frames as (index, av.VideoFrame), sorted by index.

    Decoded by ``stream``'s decoder in ``container`` where given (a second container on the
    header's source, so that a give-up leaves the header's decoder unopened), else the
    header's. ``packets``: the stream demuxed again (``iter_packets``, the default), each
    packet dropped once decoded, so memory holds the decoder's state and the wanted frames,
    not the stream. None if a packet or an output frame does not match the plan (no pts of it,
    or out of pts order), or a frame comes out corrupt (FFmpeg concealed damage: the
    reference's count and concealment follow every frame it decodes); the caller then decodes
    plainly. ``check()`` runs before each packet is decoded and may raise to stop;
    ``sizes(i, frame, wanted)`` sees each output frame (decode.SizeCheck) and may raise."""
    wanted = {int(i) for i in indices}
    ctx = (header.stream if stream is None else stream).codec_context
    got: dict[int, Any] = {}
    last = -1  # the index of the last frame output

    def take(frames: list[Any]) -> bool:
        """Keeps the wanted frames; False for a frame the plan cannot place."""
        nonlocal last
        for frame in frames:
            i = rank.get(frame.pts)
            if i is None or i <= last or frame.is_corrupt:
                return False
            last = i
            if sizes is not None:
                sizes(i, frame, i in wanted)
            if i in wanted:
                got[i] = frame
        return True

    try:
        for packet in iter_packets(header, container, stream) if packets is None else packets:
            i = rank.get(packet.pts)
            if i is None:
                return None
            if check is not None:
                check()
            ctx.skip_frame = "DEFAULT" if i in wanted else "NONREF"
            if not take(ctx.decode(packet)):
                return None
            if len(got) == len(wanted):
                break
        else:
            ctx.skip_frame = "DEFAULT"
            if not take(ctx.decode(None)):
                return None
    finally:
        ctx.skip_frame = "DEFAULT"
    if len(got) < len(wanted):
        return None  # a wanted frame never came out: the plan missed something; decode plainly
    return sorted(got.items())


__all__ = ["SKIPPABLE", "decode_skipping", "iter_packets", "plan_skips", "skip_hazard"]
