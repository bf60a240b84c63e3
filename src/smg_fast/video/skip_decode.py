"""Decoding fewer frames: non-reference frames that sampling does not keep are never decoded.

A non-reference frame (an H.264 / HEVC frame no other frame predicts from, typically most
B-frames) changes no other frame, so skipping it changes no kept frame. FFmpeg skips one when
``skip_frame`` is NONREF while its packet is decoded; it is set per packet, to NONREF for the
frames sampling drops and DEFAULT for the ones it keeps. Skipped frames are not output, so frames
are identified by their presentation timestamp: frame ``i`` (the reference's ``i``-th output
frame) is the one with the ``i``-th smallest pts. That holds when every packet carries one frame
with a distinct pts, which ``plan_skips`` checks from the demuxed packets; otherwise (or for
other codecs, or frame threads) the plain decode runs. Tests compare both with transformers'
loader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .container import VideoHeader

SKIPPABLE = frozenset({"h264", "hevc"})


def plan_skips(header: VideoHeader,
               threads: int | None) -> tuple[list[Any], dict[int, int]] | None:
    """(the stream's packets in decode order, pts -> frame index), or None.

    None: the plain decode must run (another codec, frame threads, packets without one distinct
    pts each)."""
    if header.codec not in SKIPPABLE or (threads is not None and threads != 1):
        return None
    container = header.container
    container.seek(0)
    packets = [p for p in container.demux(header.stream) if p.size]
    container.seek(0)
    pts = [p.pts for p in packets]
    if len(packets) != header.total_frames or any(t is None for t in pts) or \
            len(set(pts)) != len(pts):
        return None
    return packets, {t: i for i, t in enumerate(sorted(pts))}


def decode_skipping(header: VideoHeader, indices: Sequence[int], packets: list[Any],
                    rank: dict[int, int]) -> list[tuple[int, Any]] | None:
    """The wanted frames as (index, av.VideoFrame), sorted by index.

    None if the decoder output a frame the plan cannot place (the caller then decodes
    plainly)."""
    wanted = {int(i) for i in indices}
    ctx = header.stream.codec_context
    got: dict[int, Any] = {}

    def take(frames: list[Any]) -> bool:
        """Keeps the wanted frames; False for a frame the plan cannot place."""
        for frame in frames:
            i = rank.get(frame.pts)
            if i is None:
                return False
            if i in wanted:
                got[i] = frame
        return True

    try:
        for packet in packets:
            ctx.skip_frame = "DEFAULT" if rank[packet.pts] in wanted else "NONREF"
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
    return sorted(got.items())


__all__ = ["SKIPPABLE", "decode_skipping", "plan_skips"]
