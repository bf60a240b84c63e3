"""Decoding an H.264 / HEVC stream's sampled frames on several threads, one run of GOPs each.

An IDR picture closes its group: no picture after it in decode order refers to one before it. So
the packets from one IDR to the next decode to the same frames on a fresh decoder as they do in
one decode of the whole stream. The stream's packets are planned once (each one's pts, and
whether it is an IDR, from its NAL unit types), the groups holding wanted frames are cut into
contiguous runs of about equal decoding work, and each run is decoded by a decoder of its own (a
container opened on the same bytes or file, seeked to the run's first IDR) on a thread of its
own: FFmpeg's decode, called by PyAV without the GIL, runs in parallel. Groups without a wanted
frame are not decoded at all, and within a group the non-reference frames not wanted are skipped
(skip_decode.py). Frames are placed by pts as skip_decode places them. A packet or frame off the
plan, or a seek that misses its IDR, returns None: the caller then decodes sequentially. Tests
compare the frames with PyAV's sequential decode.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .container import VideoHeader, cap_picture_size, open_again
from .nal_units import is_idr, nal_length_size
from .skip_decode import SKIPPABLE, iter_packets, skip_hazard


@dataclass
class PacketPlan:
    """The stream's packets in decode order: pts, IDR or not, and pts -> frame index."""

    pts: list[int]
    idr: list[bool]
    rank: dict[int, int]

    def __post_init__(self) -> None:
        self.position = {t: k for k, t in enumerate(self.pts)}
        self.starts = [k for k, is_idr in enumerate(self.idr) if is_idr]


def plan_packets(header: VideoHeader) -> PacketPlan | None:
    """Every packet's pts and IDR flag, from one demux of the stream; None when unplannable.

    As skip_decode's plan: one output frame per packet (none flagged discard), each with a
    distinct pts, an IDR first, and no ``skip_hazard``."""
    if header.codec not in SKIPPABLE:
        return None
    length_size = nal_length_size(header)
    if skip_hazard(header, None, length_size):
        return None
    pts: list[int] = []
    idr: list[bool] = []
    for packet in iter_packets(header):
        if packet.pts is None or packet.is_discard or len(pts) == header.total_frames:
            return None
        pts.append(packet.pts)
        if skip_hazard(header, packet, length_size):
            return None  # as skip_decode.plan_skips: non-reference pictures are skipped here too
        idr.append(is_idr(packet, header.codec, length_size))
    if len(pts) != header.total_frames or len(set(pts)) != len(pts) or not idr or not idr[0]:
        return None
    return PacketPlan(pts, idr, {t: i for i, t in enumerate(sorted(pts))})


def plan_runs(plan: PacketPlan, wanted: Sequence[int], workers: int
              ) -> list[list[tuple[int, int]]]:
    """The wanted frames' groups as (first packet, last packet to decode), cut into runs.

    At most ``workers`` contiguous runs of about equal packets to decode; a group is decoded
    from its IDR to the packet of its last wanted frame."""
    order = sorted(plan.rank, key=plan.rank.__getitem__)  # frame index -> pts
    last: dict[int, int] = {}  # group start -> last packet wanted in it
    for i in wanted:
        k = plan.position[order[i]]
        start = plan.starts[bisect.bisect_right(plan.starts, k) - 1]
        last[start] = max(last.get(start, k), k)
    groups = sorted(last.items())
    total = sum(end - start + 1 for start, end in groups)
    runs: list[list[tuple[int, int]]] = [[]]
    done = 0
    for start, end in groups:
        cost = end - start + 1
        # a new run where this group's middle passes the next run's share of the work
        if runs[-1] and len(runs) < workers and done + cost / 2 >= total * len(runs) / workers:
            runs.append([])
        runs[-1].append((start, end))
        done += cost
    return runs


def _open_again(header: VideoHeader) -> Any:
    """A second container on the header's source, its video stream decoding on one thread."""
    container = open_again(header)  # the file first opened, or InvalidVideoError
    ctx = container.streams.video[0].codec_context
    ctx.thread_count = 1
    ctx.thread_type = "SLICE"
    return container


_Sizes = Callable[[int, Any, bool], None] | None  # decode.SizeCheck: sees each output frame


class _Stopped(Exception):
    """Another run failed: this one stops."""


def _decode_group(container: Any, plan: PacketPlan, start: int, end: int, wanted: set[int],
                  got: dict[int, Any], check: Callable[[], None], sizes: _Sizes = None) -> bool:
    """Decodes packets start..end (an IDR's group, up to its last wanted frame) into got.

    False when a packet or frame is off the plan, or the seek does not reach the IDR."""
    stream = container.streams.video[0]
    ctx = stream.codec_context
    ctx.flush_buffers()
    container.seek(plan.pts[start], stream=stream, backward=True, any_frame=False)

    def take(frames: list[Any]) -> bool:
        for frame in frames:
            i = plan.rank.get(frame.pts)
            if i is None:
                return False
            if sizes is not None:
                sizes(i, frame, i in wanted)
            if i in wanted:
                got[i] = frame
        return True

    fed = False
    try:
        for packet in container.demux(stream):
            if not packet.size:
                continue
            k = plan.position.get(packet.pts)
            if k is None or (k < start and fed) or (k > start and not fed):
                return False  # off the plan, or the seek landed past the IDR
            if k < start:
                continue  # the seek may land on an earlier keyframe
            if k > end:
                break
            check()
            ctx.skip_frame = "DEFAULT" if plan.rank[packet.pts] in wanted else "NONREF"
            if not take(ctx.decode(packet)):
                return False
            fed = True
        ctx.skip_frame = "DEFAULT"
        return fed and take(ctx.decode(None))
    finally:
        ctx.skip_frame = "DEFAULT"


def _decode_run(header: VideoHeader, plan: PacketPlan, run: list[tuple[int, int]],
                wanted: set[int], check: Callable[[], None], sizes: _Sizes = None
                ) -> dict[int, Any] | None:
    """The wanted frames of one run's groups, on a decoder of its own; None off the plan."""
    container = _open_again(header)
    if not getattr(sizes, "follow", True):  # planned from the header (SizeCheck), as iter_frames
        cap_picture_size(container.streams.video[0], header.width, header.height)
    try:
        got: dict[int, Any] = {}
        for start, end in run:
            if not _decode_group(container, plan, start, end, wanted, got, check, sizes):
                return None
        return got
    finally:
        container.close()


def decode_parallel(header: VideoHeader, wanted: Sequence[int], workers: int,
                    check: Callable[[], None] | None = None, sizes: _Sizes = None
                    ) -> list[tuple[int, Any]] | None:
    """The wanted frames as (index, av.VideoFrame) in index order, decoded by up to workers runs.

    None when the stream cannot be planned (another codec, no IDR boundaries, packets without
    one distinct pts each, no source to open again) or a run went off the plan: decode
    sequentially then. ``check()`` runs before each packet on every thread, ``sizes(i, frame,
    wanted)`` on each output frame (decode.SizeCheck); what either raises stops every run and is
    raised here."""
    if workers < 2 or header.source is None or not wanted:
        return None
    plan = plan_packets(header)
    if plan is None:
        return None
    runs = plan_runs(plan, wanted, workers)
    if len(runs) < 2:
        return None
    want = set(int(i) for i in wanted)
    stop = threading.Event()

    def checked() -> None:
        if stop.is_set():
            raise _Stopped
        if check is not None:
            check()

    results: list[dict[int, Any] | None] = [None] * len(runs)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            results[n] = _decode_run(header, plan, runs[n], want, checked, sizes)
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(exc)
            stop.set()

    started: list[threading.Thread] = []
    try:
        for n in range(1, len(runs)):
            t = threading.Thread(target=work, args=(n,), name=f"smg-fast-gop-{n}", daemon=True)
            t.start()
            started.append(t)
        work(0)
    except BaseException:
        stop.set()  # a thread that did not start, an interrupt: the started runs stop too
        raise
    finally:
        for t in started:
            t.join()
    if errors:
        raise errors[0]
    if any(r is None for r in results):
        return None
    got: dict[int, Any] = {}
    for r in results:
        got.update(r or {})
    if set(got) != want:
        return None
    return sorted(got.items())


__all__ = ["PacketPlan", "decode_parallel", "plan_packets", "plan_runs"]
