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
from .h264_sps import avcc_sps, starts_with_idr

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


def _open(index: int, source: VideoSource, limits: VideoLimits) -> tuple[Any, Any]:
    """The PyAV container for bytes or a local path, and the path's file identity (or None).

    Typed errors for what FFmpeg refuses."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        size = memoryview(source).nbytes
        if size == 0:
            raise InvalidVideoError(index, "empty video data")
        if size > limits.max_bytes:
            raise InvalidVideoError(index, f"{size} bytes, over the limit of "
                                           f"{limits.max_bytes} bytes")
        head = bytes(memoryview(source)[:_SNIFF_BYTES])
        return _av_open(index, lambda: io.BytesIO(source), head), None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        fd, st = _open_file(index, path)
        try:
            if st.st_size > limits.max_bytes:
                raise InvalidVideoError(index, f"{path!r} is over the limit of "
                                               f"{limits.max_bytes} bytes")
            alias = _fd_path(fd, path)
            container = _av_open(index, lambda: alias, os.pread(fd, _SNIFF_BYTES, 0))
        finally:
            os.close(fd)
        return container, _identity(st)
    raise TypeError(f"video {index}: expected encoded bytes or a file path, got "
                    f"{type(source).__name__}")


def _av_open(index: int, make_file: Callable[[], Any], head: bytes) -> Any:
    """PyAV's container on make_file(), opened without FFmpeg's probe decode where that is exact.

    FFmpeg decodes each stream's first frames while opening, to learn what the header leaves out;
    the keyframe it decodes is decoded again with the frames (tens of ms for a detailed HD one).
    A file that starts as MP4 / MOV does (``head``) is first opened with the probe's decoders
    refused; it is kept when its first video stream is H.264 whose header states all the probe
    learns (``_probe_decode_needless``), and opened again as FFmpeg opens it by default if not."""
    av = _av()
    if head[4:8] in _MP4_BOXES:
        container = None
        try:
            container = av.open(make_file(), mode="r", metadata_errors="ignore",
                                stream_options=[_NO_PROBE_DECODE] * _PROBED_STREAMS)
            if _probe_decode_needless(container):
                container, kept = None, container
                return kept
        except (av.FFmpegError, ValueError):
            pass  # the default open below says what is wrong
        finally:
            if container is not None:
                container.close()
    try:
        return av.open(make_file(), mode="r", metadata_errors="ignore")
    except (av.FFmpegError, ValueError) as exc:
        raise InvalidVideoError(index, f"not a readable video container ({exc})") from None
# A decoder option for the container's probe only (the decoder that decodes the frames is made
# from the stream's parameters, without it): no decoder is allowed, so FFmpeg decodes nothing
# while opening and keeps what the demuxer read. Given for the first _PROBED_STREAMS streams.
_NO_PROBE_DECODE = {"codec_whitelist": "none"}
_PROBED_STREAMS = 32
# The first box of an MP4 / MOV file (ISO/IEC 14496-12; QuickTime's may come before ftyp).
_MP4_BOXES = frozenset({b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide"})
_SNIFF_BYTES = 8


def _probe_decode_needless(container: Any) -> bool:
    """True for an MP4 / MOV whose first video stream is H.264 stating what the probe learns.

    The avcC's one SPS must state 8-bit 4:2:0 progressive frames, their reorder depth and, cropped
    on the right and bottom only, the sample entry's size; the first packet must be an IDR picture
    whose in-band SPS, if any, is that SPS (``h264_sps.py``). Other demuxers estimate stream
    timings from the probe (Matroska's stream start time and duration differ without it)."""
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
        first = next(iter(container.demux(stream)), None)
        ok = first is not None and first.is_keyframe and starts_with_idr(extradata, bytes(first))
    finally:
        container.seek(0)
    return ok


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

    InvalidVideoError where the path now names another file, or no regular file (a FIFO there
    would block the open; another video would lend this one its rotation or its frames)."""
    src = header.source
    if not isinstance(src, (str, os.PathLike)):
        head = bytes(memoryview(src)[:_SNIFF_BYTES])
        return _av_open(header.index, lambda: io.BytesIO(src), head)
    path = os.fspath(src)
    fd, st = _open_file(header.index, path)
    try:
        if _identity(st) != header.identity:
            raise InvalidVideoError(header.index, f"{path!r} changed after it was opened")
        alias = _fd_path(fd, path)
        return _av_open(header.index, lambda: alias, os.pread(fd, _SNIFF_BYTES, 0))
    finally:
        os.close(fd)


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


def _check(index: int, container: Any, limits: VideoLimits,
           size: int | None) -> VideoHeader:
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
    return VideoHeader(index, container, stream, CODECS.get(name, name), width, height, total,
                       fps, counted, _pixel_format(stream))


def _pixel_format(stream: Any) -> str | None:
    """The decoded frames' pixel format: FFmpeg's, or the SPS's where FFmpeg skipped its probe."""
    fmt = stream.codec_context.format
    if fmt is not None:
        return fmt.name
    if stream.codec_context.name == "h264":
        sps = avcc_sps(bytes(stream.codec_context.extradata or b""))
        if sps is not None and sps.states_decoder_setup:
            return "yuv420p"  # or yuvj420p for full range: the same planes
    return None


def set_threads(header: VideoHeader, threads: int | None) -> None:
    """FFmpeg's decoder threads for this stream, set before its decoder opens.

    None keeps PyAV's defaults, which transformers' loader runs (slice threads, FFmpeg's count);
    1: no threads; n > 1 or 0 (FFmpeg's count): frame and slice threads. Valid streams decode to
    the same frames either way; a damaged one may be concealed differently. Once the decoder is
    open (decoding began) the same setting again is a no-op; another one is a
    RuntimeError."""
    if threads is None:
        return
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    ctx = header.stream.codec_context
    kind = "SLICE" if threads == 1 else "AUTO"
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
    container, identity = _open(index, source, limits)
    size = memoryview(source).nbytes if identity is None else identity[2]
    try:
        header = _check(index, container, limits, size)
    except BaseException:
        container.close()
        raise
    header.source = source
    header.identity = identity
    header.limits = limits
    return header


__all__ = ["CODECS", "InvalidVideoError", "UnsupportedVideoError", "VideoHeader", "VideoLimits",
           "VideoSource", "cap_picture_size", "open_again", "open_video",
           "set_threads"]
