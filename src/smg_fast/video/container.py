"""A video's container header, read and checked before any frame is decoded.

PyAV (FFmpeg) opens the container from its bytes or a local file; the first video stream's
codec, size, declared frame count and rate are checked against ``VideoLimits`` so a video bomb
(declared hours long, 8K frames, a tiny file claiming a huge frame count) or an unsupported
codec is refused with a typed error before a frame is decoded.

The frame count and rate are the ones transformers' PyAV loader reads (``stream.frames``,
``stream.average_rate``). Containers that declare no frame count (WebM, Matroska) have their
video packets counted instead (demuxing only, no decoding); transformers' loader fails on them.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidVideoError, UnsupportedVideoError
from .probe_skip import SNIFF_BYTES, open_unprobed, sps_pixel_format

# FFmpeg decoder names accepted by default, and the codec each one decodes.
CODECS: dict[str, str] = {"h264": "h264", "hevc": "hevc", "vp8": "vp8", "vp9": "vp9",
                          "av1": "av1", "libdav1d": "av1", "mpeg4": "mpeg4"}

VideoSource = bytes | bytearray | memoryview | str | os.PathLike[str]


@dataclass(frozen=True)
class VideoLimits:
    """What a video's header may declare; anything past these is refused before decoding."""

    max_bytes: int = 1 << 31
    max_side: int = 8192
    max_frame_pixels: int = 4096 * 4096  # 4K passes, 8K (33 Mpx) is refused
    max_frames: int = 108_000  # declared frames: an hour at 30 fps
    max_duration_s: float = 3600.0
    codecs: frozenset[str] = field(default_factory=lambda: frozenset(CODECS))


def _av() -> Any:
    """The PyAV module (``pip install av``), or an ImportError naming the package."""
    try:
        import av
    except ImportError as exc:  # pragma: no cover - av is a test and [video] dependency
        raise ImportError("smg-fast decodes videos with PyAV: pip install 'av>=12,<19'") from exc
    return av


@dataclass
class VideoHeader:
    """An opened container: its first video stream's facts, checked against the limits."""

    index: int
    container: Any
    stream: Any
    codec: str
    width: int
    height: int
    total_frames: int
    fps: float | None
    counted: bool  # True: the container declares no frame count, packets were counted
    pixel_format: str | None = None  # FFmpeg's name for the decoded frames' format, if known
    probe_skipped: bool = False  # opened without FFmpeg's probe decode (probe_skip.py)
    source: Any = None  # the bytes or path it was opened on (decoders may open it again)
    identity: tuple[int, ...] | None = None  # a path's file as opened (reopen_source checks it)
    limits: VideoLimits | None = None  # what it was checked against (decoded frames are too)

    @property
    def duration(self) -> float:
        """Seconds, as transformers' loader computes them (frames / rate; 0 without a rate)."""
        return self.total_frames / self.fps if self.fps else 0.0

    def metadata(self) -> dict[str, Any]:
        """The fields of transformers' ``VideoMetadata`` that its PyAV loader fills."""
        return {"total_num_frames": self.total_frames, "fps": self.fps,
                "duration": self.duration, "video_backend": "pyav", "height": self.height,
                "width": self.width}

    def close(self) -> None:
        """Closes the container (idempotent)."""
        self.container.close()


def _open(index: int, source: VideoSource,
          limits: VideoLimits) -> tuple[Any, Any, bool, VideoSource]:
    """The PyAV container for bytes or a local path, its file identity, whether unprobed, source.

    The identity is a path's (None for bytes); unprobed: opened without FFmpeg's probe decode;
    source: the path, or the data as bytes (what was checked is what any later open reads).
    Typed errors for what FFmpeg refuses."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        size = memoryview(source).nbytes
        if size == 0:
            raise InvalidVideoError(index, "empty video data")
        if size > limits.max_bytes:
            raise InvalidVideoError(index, f"{size} bytes, over the limit of "
                                           f"{limits.max_bytes} bytes")
        data = _as_bytes(source)
        container, skipped = _av_open(index, lambda: io.BytesIO(data), data[:SNIFF_BYTES])
        return container, None, skipped, data
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        fd, st = _open_file(index, path)
        try:
            if st.st_size > limits.max_bytes:
                raise InvalidVideoError(index, f"{path!r} is over the limit of "
                                               f"{limits.max_bytes} bytes")
            alias = _fd_path(fd, path)
            container, skipped = _av_open(index, lambda: alias, os.pread(fd, SNIFF_BYTES, 0))
        finally:
            os.close(fd)
        return container, _identity(st), skipped, source
    raise TypeError(f"video {index}: expected encoded bytes or a file path, got "
                    f"{type(source).__name__}")


def _av_open(index: int, make_file: Callable[[], Any], head: bytes) -> tuple[Any, bool]:
    """PyAV's container on make_file() and whether FFmpeg's probe decode was skipped.

    Skipped where that is exact (``probe_skip.py``; ``head``: the file's first bytes, b"" not
    to try); else opened as FFmpeg opens it by default."""
    container = open_unprobed(make_file, head)
    if container is not None:
        return container, True
    av = _av()
    try:
        return av.open(make_file(), mode="r", metadata_errors="ignore"), False
    except (av.FFmpegError, ValueError) as exc:
        raise InvalidVideoError(index, f"not a readable video container ({exc})") from None


def _as_bytes(source: bytes | bytearray | memoryview) -> bytes:
    """The data as bytes (BytesIO shares bytes; it would copy anything else at every open)."""
    return source if isinstance(source, bytes) else bytes(source)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _open_file(index: int, path: str) -> tuple[int, os.stat_result]:
    """A descriptor of path when it is a regular file (a FIFO is not waited on), and its stat."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise InvalidVideoError(index, f"no such file: {path!r}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InvalidVideoError(index, f"no such file: {path!r} (not a regular file)")
    return fd, st


def _fd_path(fd: int, path: str) -> str:
    """A name FFmpeg opens the descriptor's own file by (Linux), else the path itself."""
    alias = f"/proc/self/fd/{fd}"
    return alias if os.path.isdir("/proc/self/fd") else path


def open_again(header: VideoHeader) -> Any:
    """A second container on the header's bytes, or on its path's file as first opened.

    Without FFmpeg's probe decode where the first was opened so and the file still allows it.

    InvalidVideoError where the path now names another file, or no regular file (a FIFO there
    would block the open; another video would lend this one its rotation or its frames)."""
    src = header.source
    if not isinstance(src, (str, os.PathLike)):
        data = _as_bytes(src)
        head = data[:SNIFF_BYTES] if header.probe_skipped else b""
        return _with_video(header, _av_open(header.index, lambda: io.BytesIO(data), head)[0])
    path = os.fspath(src)
    fd, st = _open_file(header.index, path)
    try:
        if _identity(st) != header.identity:
            raise InvalidVideoError(header.index, f"{path!r} changed after it was opened")
        alias = _fd_path(fd, path)
        head = os.pread(fd, SNIFF_BYTES, 0) if header.probe_skipped else b""
        return _with_video(header, _av_open(header.index, lambda: alias, head)[0])
    finally:
        os.close(fd)


def _with_video(header: VideoHeader, container: Any) -> Any:
    """container, or InvalidVideoError (closed) where its video stream is not the header's codec.

    A file rewritten in place with its size and modification time kept passes the identity
    check; what it holds then is checked this far."""
    video = container.streams.video
    ctx = video[0].codec_context if video else None
    if ctx is None or CODECS.get(ctx.name, ctx.name) != header.codec:
        container.close()
        raise InvalidVideoError(header.index, "the video changed after it was opened (its "
                                              "video stream is gone or of another codec)")
    return container


def _count_packets(container: Any, stream: Any, limit: int, index: int) -> int:
    """Video packets with data (one per frame) by demuxing; refuses more than limit."""
    av = _av()
    count = 0
    try:
        for packet in container.demux(stream):
            if packet.size:
                count += 1
                if count > limit:
                    raise InvalidVideoError(index, f"more than {limit} frames")
        container.seek(0)  # a damaged index can refuse the rewind
    except av.FFmpegError as exc:
        raise InvalidVideoError(index, f"corrupt container ({exc})") from None
    return count


def _check(index: int, container: Any, limits: VideoLimits, size: int | None,
           probe_skipped: bool = False) -> VideoHeader:
    """The header of container's first video stream, or a typed error."""
    if not container.streams.video:
        raise InvalidVideoError(index, "the container holds no video stream")
    stream = container.streams.video[0]
    ctx = stream.codec_context
    if ctx is None:  # a codec tag FFmpeg has no decoder for
        raise UnsupportedVideoError(index, f"the video stream's codec is unknown to FFmpeg "
                                           f"(supported: {sorted(limits.codecs)})")
    name = ctx.name
    if name not in limits.codecs:
        raise UnsupportedVideoError(index, f"codec {name!r} is not supported (supported: "
                                           f"{sorted(limits.codecs)})")
    width, height = int(stream.width), int(stream.height)
    if width < 1 or height < 1:
        raise InvalidVideoError(index, f"zero-size frames ({width}x{height})")
    if max(width, height) > limits.max_side or width * height > limits.max_frame_pixels:
        raise InvalidVideoError(index, f"{width}x{height} frames are over the limit of "
                                       f"{limits.max_frame_pixels} pixels or "
                                       f"{limits.max_side} per side")
    rate = stream.average_rate
    fps = float(rate) if rate else None
    declared = int(stream.frames or 0)
    seconds = (container.duration or 0) / 1_000_000
    if seconds > limits.max_duration_s:
        raise InvalidVideoError(index, f"declares {seconds:.0f} s, over the limit of "
                                       f"{limits.max_duration_s:g} s")
    # A frame needs at least one byte of packet data: more declared frames than bytes is a lie.
    if declared > limits.max_frames or (size is not None and declared > size):
        raise InvalidVideoError(index, f"declares {declared} frames (limit {limits.max_frames}"
                                       f"{'' if size is None else f', file {size} bytes'})")
    counted = declared == 0
    total = _count_packets(container, stream, limits.max_frames, index) if counted else declared
    if total < 1:
        raise InvalidVideoError(index, "the video stream holds no frames")
    if fps and total / fps > limits.max_duration_s:
        raise InvalidVideoError(index, f"{total} frames at {fps:g} fps are over the limit of "
                                       f"{limits.max_duration_s:g} s")
    fmt = ctx.format
    pixel_format = fmt.name if fmt is not None else (
        sps_pixel_format(stream) if probe_skipped else None)
    return VideoHeader(index, container, stream, CODECS.get(name, name), width, height, total,
                       fps, counted, pixel_format, probe_skipped)


def thread_kind(threads: int) -> str:
    """FFmpeg's thread type for a thread count: slice threads for 1, else frame and slice."""
    return "SLICE" if threads == 1 else "AUTO"


def set_threads(header: VideoHeader, threads: int | None) -> None:
    """FFmpeg's decoder threads for this stream, set before its decoder opens.

    None keeps PyAV's defaults, which transformers' loader runs (slice threads, FFmpeg's count);
    1: no threads; n > 1 or 0 (FFmpeg's count): frame and slice threads. Valid streams decode to
    the same frames either way (but multi-slice HEVC on frame threads: docs/video.md); a damaged
    one may be concealed differently. Once the decoder is
    open (decoding began) the same setting again is a no-op; another one is a
    RuntimeError."""
    if threads is None:
        return
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    ctx = header.stream.codec_context
    kind = thread_kind(threads)
    if ctx.is_open:
        if ctx.thread_type.name == kind and threads in (0, ctx.thread_count):
            return  # 0: FFmpeg chose the count when it opened
        raise RuntimeError(f"video {header.index}: its decoder is already open with "
                           f"{ctx.thread_count} {ctx.thread_type.name} threads")
    ctx.thread_count = threads
    ctx.thread_type = kind


def cap_picture_size(stream: Any, width: int, height: int) -> None:
    """Has FFmpeg refuse, before allocating it, a picture much larger than width x height.

    For a decode whose memory was planned from the header (the server's): a stream that grows
    mid-stream past its header's size stops with an FFmpegError instead of decoding the larger
    pictures first. FFmpeg checks its own padded size (the width rounded up to 64 for H.264,
    HEVC and VP9, and at least 53,760 pixels for MPEG-4 part 2, measured with FFmpeg 8.1): the
    cap is both sides rounded up to 64, and at least 65,536. Set before the decoder opens."""
    ctx = stream.codec_context
    if ctx.is_open:
        return
    limit = max(-(-width // 64) * 64 * (-(-height // 64) * 64), 1 << 16)
    ctx.options = {**ctx.options, "max_pixels": str(limit)}


def open_video(index: int, source: VideoSource,
               limits: VideoLimits | None = None) -> VideoHeader:
    """Opens a video's container and checks its header; close() it when done.

    Raises InvalidVideoError (corrupt, empty, over a limit) or UnsupportedVideoError (codec)."""
    limits = limits or VideoLimits()
    container, identity, skipped, source = _open(index, source, limits)
    size = memoryview(source).nbytes if identity is None else identity[2]
    try:
        header = _check(index, container, limits, size, skipped)
    except BaseException:
        container.close()
        raise
    header.source = source
    header.identity = identity
    header.limits = limits
    return header


__all__ = ["CODECS", "InvalidVideoError", "UnsupportedVideoError", "VideoHeader", "VideoLimits",
           "VideoSource", "cap_picture_size", "open_again", "open_video",
           "set_threads", "thread_kind"]
