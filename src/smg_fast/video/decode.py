"""Decoding the sampled frames of an opened video with PyAV, as transformers' PyAV loader does.

Frames are counted in the order the decoder outputs them after ``container.seek(0)``, as
``transformers.video_utils.read_video_pyav`` counts them, so frame ``i`` here is its frame ``i``.
Only what sampling needs is done: decoding stops after the last needed frame, and a frame that
is not needed is never converted to RGB. The needed frames are kept (in the decoder's YUV) and
converted once decoding has passed the last of them, as the reference converts them. The RGB
conversion is the chosen decoder's (``decoder``: ``pyav``, transformers' PyAV loader, the
default; ``torchcodec``; ``opencv``; see convert.py), so the pixels are that reference's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import FrameIndexError, InvalidVideoError
from .container import (
    VideoHeader,
    VideoLimits,
    VideoSource,
    _av,
    cap_picture_size,
    open_again,
    open_video,
    set_threads,
    thread_kind,
)
from .convert import FrameConverter, check_decoder
from .decode_memory import format_bytes, named_format
from .parallel_decode import decode_parallel
from .skip_decode import decode_skipping, plan_skips
from .stream_scan import decoder_metadata, frame_size, stream_rotation


class SizeCheck:
    """Refuses a decoded frame whose size the output or the decode budget was not planned for.

    ``follow``: the sampled frames may have any one size (transformers' PyAV loader stacks
    them: one size or a ValueError), read from the first of them to be decoded (parallel runs
    may decode a later one first); otherwise (the server, whose
    output and decode budget are planned from the header) a sampled frame must have the header's
    size, no decoded frame may have more pixels, and none may take more bytes than a frame of the
    header's pixel format (a stream whose pixel format widens mid-stream, 4:2:0 to 4:4:4 or 8 to
    10 bits, would hold more than was planned). Runs as each frame leaves the decoder, so
    nothing is kept or converted at a size that was not planned."""

    def __init__(self, header: VideoHeader, follow: bool = False) -> None:
        self.header = header
        self.follow = follow
        self.size: tuple[int, int] | None = None if follow else (header.width, header.height)
        self._lock = threading.Lock()  # the parallel decode's runs check on threads of their own
        self._format = header.pixel_format  # the header's pixel format: planned as is
        self._bytes = format_bytes(named_format(self._format), header.width, header.height)

    def __call__(self, i: int, frame: Any, wanted: bool) -> None:
        h = self.header
        size = (frame.width, frame.height)
        if self.follow:
            limits = h.limits or VideoLimits()
            if max(size) > limits.max_side or size[0] * size[1] > limits.max_frame_pixels:
                self._refuse(i, size, f"over the limit of {limits.max_frame_pixels} pixels or "
                                      f"{limits.max_side} per side")
        if wanted:
            with self._lock:
                if self.size is None:
                    self.size = size
                seen = self.size
            if size != seen:
                first = "the stream declares" if not self.follow else "another sampled frame is"
                self._refuse(i, size, f"{first} {seen[0]}x{seen[1]}")
        elif not self.follow and size[0] * size[1] > h.width * h.height:
            self._refuse(i, size, f"larger than the {h.width}x{h.height} the stream declares, "
                                  "which its decode memory was planned for")
        if not self.follow and frame.format.name != self._format:
            got = format_bytes(frame.format, *size)
            if got > self._bytes:
                raise InvalidVideoError(
                    h.index, f"frame {i} is {size[0]}x{size[1]} in {frame.format.name}, {got} "
                             f"bytes, more than the {self._bytes} of a {h.width}x{h.height} "
                             f"{self._format} frame that its decode memory was planned for (the "
                             "pixel format changes mid-stream)")

    def _refuse(self, i: int, size: tuple[int, int], why: str) -> None:
        raise InvalidVideoError(self.header.index, f"frame {i} is {size[0]}x{size[1]}, {why} "
                                                   "(the frame size changes mid-stream)")


def _decode_wanted(header: VideoHeader, wanted: set[int], end: int, threads: int | None,
                   skip: bool, check: Callable[[], None] | None,
                   sizes: SizeCheck) -> list[tuple[int, Any]]:
    """The wanted frames (index, av.VideoFrame) in index order, not yet converted.

    ``sizes`` sees every frame the decoder outputs, as it does (skipped frames are not)."""
    if skip and threads is not None and threads != 1:  # IDR-started groups on threads of their own
        got = decode_parallel(header, sorted(wanted), threads or os.cpu_count() or 1, check,
                              sizes)
        if got is not None:
            return got
    if skip and (rank := plan_skips(header)) is not None:
        got = _skip_decoded(header, sorted(wanted), rank, threads, check, sizes)
        if got is not None:
            return got
    return _decode_plainly(header.container, header.stream, wanted, end, check, sizes)


def _skip_decoded(header: VideoHeader, wanted: list[int], rank: dict[int, int],
                  threads: int | None, check: Callable[[], None] | None,
                  sizes: SizeCheck) -> list[tuple[int, Any]] | None:
    """The skip decode on a second container, or None where it gave up.

    A decoder that gave up holds in its pool the frames it decoded, which concealing a damaged
    stream would read, so the plain decode after it runs on the header's decoder, never opened
    till then; this one is closed and released first (one decoder's memory at a time)."""
    try:
        container, stream = _fresh_decoder(header, threads, not sizes.follow)
    except InvalidVideoError:
        return None  # the file changed since it was opened: the header's reads the first one
    try:
        return decode_skipping(header, wanted, rank, check=check, sizes=sizes,
                               container=container, stream=stream)
    finally:
        container.close()


def _decode_plainly(container: Any, stream: Any, wanted: set[int], end: int,
                    check: Callable[[], None] | None, sizes: SizeCheck) -> list[tuple[int, Any]]:
    """The wanted frames of every frame the decoder outputs from the start, to the end one."""
    kept: list[tuple[int, Any]] = []
    container.seek(0)
    for i, frame in enumerate(container.decode(stream)):
        if i > end:
            break
        if check is not None:
            check()
        sizes(i, frame, i in wanted)
        if i in wanted:  # a frame not needed is never converted
            kept.append((i, frame))
    return kept


def _fresh_decoder(header: VideoHeader, threads: int | None,
                   capped: bool) -> tuple[Any, Any]:
    """A second container on the header's source and its video stream, set up as the header's.

    Threads as set_threads sets them on the header's decoder; the header's picture size cap
    where ``capped``. The caller closes the container."""
    container = open_again(header)
    try:
        stream = container.streams.video[0]
        if threads is not None:
            stream.codec_context.thread_count = threads
            stream.codec_context.thread_type = thread_kind(threads)
        if capped:
            cap_picture_size(stream, header.width, header.height)
    except BaseException:
        container.close()
        raise
    return container, stream


def check_indices(index: int, indices: Sequence[int], total: int, hint: str = "") -> None:
    """FrameIndexError unless every index is a frame of a total-frame video (0 to total - 1).

    transformers' PyAV loader drops such indices silently (fewer frames than asked) and its
    video processors' frame indexing raises IndexError; smg-fast refuses them, before decoding."""
    bad = [int(i) for i in indices if not 0 <= int(i) < total]
    if bad:
        raise FrameIndexError(index, f"frame index {bad[0]} is outside the video's {total} "
                                     f"frames (0 to {total - 1}; {len(bad)} such index(es))"
                                     f"{hint}")


def iter_frames(header: VideoHeader, indices: Sequence[int], threads: int | None = None,
                skip: bool = True, check: Callable[[], None] | None = None,
                decoder: str = "pyav", follow_size: bool = False
                ) -> Iterator[tuple[int, np.ndarray]]:
    """(frame index, RGB (H, W, 3) uint8) for each decoded frame whose index is in indices.

    A frame may be a view with padded rows (its memory returns to a pool once dropped).

    In decode order; each index once, even if listed twice. Stops after ``indices[-1]`` as the
    reference does (an unsorted list's indices past its last one are not decoded, as there).
    ``skip``: non-reference frames not kept are not decoded either (H.264 and HEVC; see
    skip_decode.py; the frames are the same). Raises FrameIndexError for an index outside the
    header's frame count (before decoding), InvalidVideoError when the stream cannot be decoded,
    ends before a wanted frame (the header overstates its frames) or the frame size changes
    mid-stream where it was not planned for (``SizeCheck``; ``follow_size``: the sampled frames
    may have any one size, as transformers' loader stacks them). ``check()`` runs before each
    decoded frame (and packet) and may raise to stop the decoding (a deadline, a cancellation).
    ``decoder`` names whose RGB conversion the frames get (convert.py); frame ``i`` is the
    ``i``-th frame the decoder outputs for all."""
    av = _av()
    convert = FrameConverter(check_decoder(decoder), header.index)
    check_indices(header.index, indices, header.total_frames)
    if len(indices) == 0:
        return
    end = int(indices[-1])
    wanted = {int(i) for i in indices if int(i) <= end}
    set_threads(header, threads)
    if not follow_size:  # the output and decode memory were planned from the header's size
        cap_picture_size(header.stream, header.width, header.height)
    try:
        kept = _decode_wanted(header, wanted, end, threads, skip, check,
                              SizeCheck(header, follow_size))
    except av.FFmpegError as exc:
        raise InvalidVideoError(header.index, f"corrupt video stream ({exc})") from None
    if len(kept) != len(wanted):
        missing = sorted(wanted - {i for i, _ in kept})
        raise InvalidVideoError(header.index, f"the stream ends before frame {missing[0]} "
                                f"({len(missing)} wanted frame(s) missing; the header declares "
                                f"{header.total_frames} frames: truncated, or it overstates them)")
    # Converted once decoding has passed the last needed frame, as the reference converts
    # them: a damaged stream's concealment may still write into a frame after its output.
    kept.reverse()
    while kept:
        i, frame = kept.pop()
        yield i, convert(frame)
        del frame


def decode_frames(header: VideoHeader, indices: Sequence[int], threads: int | None = None,
                  skip: bool = True, decoder: str = "pyav") -> tuple[np.ndarray, list[int]]:
    """The sampled frames as one (n, H, W, 3) uint8 array and the indices they are.

    What transformers' ``read_video_pyav`` returns for these indices, except that an index
    outside the header's frame count (FrameIndexError) or past the stream's real end
    (InvalidVideoError) is refused where it would give fewer frames. Where the frame size
    changes mid-stream, the frames are the sampled frames' size as there (the header may
    declare another); sampled frames of two sizes, which the reference cannot stack, are an
    InvalidVideoError raised as the first frame of the second size is decoded."""
    check_indices(header.index, indices, header.total_frames)  # before allocating
    cap = len({int(i) for i in indices})
    rotation = stream_rotation(header) if decoder != "pyav" else 0
    out = np.empty((0, *frame_size(header, decoder, rotation), 3), np.uint8)
    found: list[int] = []
    for i, rgb in iter_frames(header, indices, threads, skip, decoder=decoder, follow_size=True):
        if not found:  # every frame is the first one's size (SizeCheck): allocated on it
            out = np.empty((cap, *rgb.shape), np.uint8)
        out[len(found)] = rgb
        found.append(i)
    return out[:len(found)], found


def load_video(source: VideoSource, indices: Sequence[int] | None = None,
               sample: Any = None, threads: int | None = None, limits: VideoLimits | None = None,
               skip: bool = True, decoder: str = "pyav") -> tuple[np.ndarray, dict[str, Any]]:
    """Frames and metadata of encoded bytes or a file, as transformers' ``load_video`` reads them.

    ``decoder``: ``pyav`` (its default backend), ``torchcodec`` (the metadata from a packet
    scan, as its exact seek mode; see stream_scan.py) or ``opencv`` (frames as OpenCV converts
    them; the header's metadata).

    ``indices``: the frames to keep; or ``sample(metadata) -> indices``; neither: every frame.
    Returns ((n, H, W, 3) uint8, metadata with ``frames_indices``). Indices are checked as
    ``decode_frames`` checks them (FrameIndexError, InvalidVideoError)."""
    header = open_video(0, source, limits)
    try:
        meta = decoder_metadata(header, check_decoder(decoder))
        if indices is None:
            every = min(int(meta["total_num_frames"]), header.total_frames)  # torchcodec's scan
            indices = sample(meta) if sample is not None else range(every)
        indices = [int(i) for i in np.asarray(indices).reshape(-1)]
        frames, _ = decode_frames(header, indices, threads, skip, decoder)
    finally:
        header.close()
    meta["frames_indices"] = indices
    return frames, meta


__all__ = ["SizeCheck", "check_indices", "decode_frames", "iter_frames", "load_video"]
