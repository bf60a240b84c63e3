"""Encoded test and benchmark videos, made here with PyAV (FFmpeg's encoders).

``make_clip`` encodes a moving scene: a picture (a real photo, or a textured pattern) panned
frame by frame, so that every frame differs and the encoder uses motion and B-frames, as on
real footage. ``codecs_available`` says which of the encoders this PyAV build has."""

from __future__ import annotations

import io
from fractions import Fraction
from typing import Any

import numpy as np

# (encoder, container format) per codec name used by the tests and the bench.
ENCODERS = {"h264": ("libx264", "mp4"), "hevc": ("libx265", "mp4"),
            "vp9": ("libvpx-vp9", "webm"), "av1": ("libsvtav1", "matroska"),
            "mpeg4": ("mpeg4", "mp4")}


def codecs_available() -> list[str]:
    """The codec names of ENCODERS this PyAV build can encode."""
    import av

    out = []
    for name, (encoder, _) in ENCODERS.items():
        try:
            av.codec.Codec(encoder, "w")
        except Exception:  # noqa: BLE001 - PyAV raises its own error kinds per build
            continue
        out.append(name)
    return out


def texture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A (height, width, 3) uint8 picture with edges, gradients and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                    ((x // 16 + y // 16) % 2) * 200 + 20], axis=-1).astype(np.int16)
    img += rng.integers(-24, 25, img.shape, dtype=np.int16)
    return np.clip(img, 0, 255).astype(np.uint8)


def scene_frame(picture: np.ndarray, width: int, height: int, i: int) -> np.ndarray:
    """Frame i of the scene: a width x height window panning smoothly over picture (tiled).

    Smooth motion, as in real footage: x264 then chooses B-frames on its own."""
    ph, pw = picture.shape[:2]
    y, x = i % ph, (2 * i) % pw
    reps = (-(-(height + y) // ph), -(-(width + x) // pw), 1)
    big = np.tile(picture, reps) if reps != (1, 1, 1) else picture
    return np.ascontiguousarray(big[y: y + height, x: x + width])


def make_clip(codec: str = "h264", width: int = 320, height: int = 240, frames: int = 24,
              fps: int | Fraction = 24, picture: np.ndarray | None = None,
              pix_fmt: str = "yuv420p", options: dict[str, str] | None = None,
              metadata: dict[str, Any] | None = None, rotation: int = 0) -> bytes:
    """An encoded clip of frames frames (codec one of ENCODERS), as its container's bytes.

    ``rotation``: a display rotation in degrees written into the container (its display
    matrix), which players (torchcodec, OpenCV) apply and transformers' PyAV loader ignores.

    Muxing is bit-exact and the encoder runs one thread unless ``options`` names threads, so
    the same arguments mostly give the same bytes and cached references stay usable (x264's
    output still varies between runs now and then)."""
    import av

    encoder, fmt = ENCODERS[codec]
    picture = texture(max(width, 64), max(height, 64)) if picture is None else picture
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt, options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(encoder, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if "threads" not in (options or {}):
            stream.codec_context.thread_count = 1
        if options:
            stream.options = dict(options)
        for key, value in (metadata or {}).items():
            stream.metadata[key] = value
        if rotation:
            stream.set_display_rotation(rotation)
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(scene_frame(picture, width, height, i),
                                               format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def overstating_clip(frames: int, kept: int, width: int = 96, height: int = 64) -> bytes:
    """An H.264 MP4 whose header declares frames frames but whose stream holds only kept.

    The index is written first (``movflags=+faststart``), then the file is cut where packet kept
    (decode order) starts: FFmpeg reads the full header and kept whole packets, then the end."""
    import os
    import tempfile

    import av

    picture = texture(max(width, 64), max(height, 64))
    with tempfile.TemporaryDirectory() as tmp:  # faststart rewrites the file: not a BytesIO
        path = os.path.join(tmp, "clip.mp4")
        with av.open(path, "w", format="mp4",
                     options={"fflags": "+bitexact", "movflags": "+faststart"}) as out:
            stream = out.add_stream("libx264", rate=12)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.codec_context.thread_count = 1
            for i in range(frames):
                frame = av.VideoFrame.from_ndarray(scene_frame(picture, width, height, i),
                                                   format="rgb24")
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        with open(path, "rb") as fh:
            data = fh.read()
    with av.open(io.BytesIO(data)) as container:
        starts = [p.pos for p in container.demux(video=0) if p.size]
    return data[:starts[kept]]


def trimmed_clip(data: bytes, drop: int) -> bytes:
    """An MP4 clip remuxed (not re-encoded) with its first ``drop`` frames before time 0.

    The MP4 muxer writes an edit list starting at 0, as a clip cut without re-encoding has:
    FFmpeg's demuxer flags the packets before it discard and the decoder outputs none of their
    frames, while the header still counts them."""
    import av

    with av.open(io.BytesIO(data)) as src:
        stream = src.streams.video[0]
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            dst = out.add_stream_from_template(stream)
            shift = None
            for packet in src.demux(stream):
                if packet.dts is None:
                    continue
                shift = drop * packet.duration if shift is None else shift
                packet.pts -= shift
                packet.dts -= shift
                packet.stream = dst
                out.mux(packet)
    return buf.getvalue()


# Encoder options that write the stream's headers (H.264 / HEVC parameter sets) in-band at
# every keyframe, so that a segment's own frame size is announced where it starts.
_INBAND_HEADERS = {"h264": {"x264-params": "repeat-headers=1"},
                   "hevc": {"x265-params": "repeat-headers=1:log-level=none"}}


def resized_clip(codec: str = "h264", sizes: tuple[tuple[Any, ...], ...] = (
        (96, 64, 6), (128, 96, 6)), fps: int = 12) -> bytes:
    """One video stream whose frame size (or pixel format) changes where each segment starts.

    ``sizes``: (width, height, frames) per segment, or (width, height, frames, pix_fmt) for a
    pixel format other than yuv420p (H.264's High 4:4:4 profile for "yuv444p"). Each segment is
    encoded on its own (its first frame a keyframe carrying its size: H.264 / HEVC parameter
    sets repeated in-band, a VP9 keyframe header) and their packets are muxed, one after
    another, into one stream of the first segment's container and header: the header declares
    the first segment's size and the sum of the frames, as an edited or spliced stream does (an
    SPS changing resolution part-way)."""
    import av

    parts = [make_clip(codec, w, h, n, fps=fps, pix_fmt=rest[0] if rest else "yuv420p",
                       options=_INBAND_HEADERS.get(codec))
             for w, h, n, *rest in sizes]
    _, fmt = ENCODERS[codec]
    buf = io.BytesIO()
    srcs = [av.open(io.BytesIO(part)) for part in parts]
    try:
        with av.open(buf, "w", format=fmt, options={"fflags": "+bitexact"}) as out:
            dst = out.add_stream_from_template(srcs[0].streams.video[0])
            shift = 0
            for src in srcs:
                stream = src.streams.video[0]
                end = shift
                for packet in src.demux(stream):
                    if packet.dts is None:
                        continue
                    packet.pts += shift
                    packet.dts += shift
                    end = max(end, packet.pts + (packet.duration or 0))
                    packet.stream = dst
                    out.mux(packet)
                shift = end
    finally:
        for src in srcs:
            src.close()
    return buf.getvalue()


__all__ = ["ENCODERS", "codecs_available", "make_clip", "overstating_clip", "resized_clip",
           "scene_frame", "texture", "trimmed_clip"]
