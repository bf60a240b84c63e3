"""Decode memory planned from a video's header: what decoding its sampled frames may hold at once.

The server budgets it across requests (--max-decode-mb) with the images' before any frame is
decoded. Decoding holds, at its peak: every sampled frame in the decoder's pixel format until the
last of them is decoded (they are converted afterwards, as the reference converts them), the
frames the codec keeps for reference and reordering (in each decoder, where several decode the
stream's groups at once; a skip decode that gives up is released before the plain decode
starts), one frame per decoder thread, the RGB frame being converted and, when an index
repeats, every converted frame.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..imaging.decode_memory import DECODER_STATE_BYTES

# Frames a decoder may keep for reference and reordering: H.264's and HEVC's largest decoded
# picture buffer (VP9 and AV1 keep 8 references).
REFERENCE_FRAMES = 16
# Bytes per pixel of a frame whose pixel format the header does not name: FFmpeg's widest integer
# formats (four 16-bit components: rgba64, yuva444p16).
UNKNOWN_FORMAT_BYTES = 8
RGB_BYTES = 3


def frame_bytes(pixel_format: str | None, width: int, height: int) -> int:
    """Bytes of one decoded frame in FFmpeg's pixel format of that name (every plane)."""
    return format_bytes(named_format(pixel_format), width, height)


def named_format(pixel_format: str | None) -> Any:
    """PyAV's VideoFormat of that name, or None (unnamed or unknown to this FFmpeg)."""
    if pixel_format is None:
        return None
    import av

    try:
        return av.VideoFormat(pixel_format)
    except ValueError:
        return None


def format_bytes(fmt: Any, width: int, height: int) -> int:
    """Bytes of a width x height frame in PyAV video format fmt (None: the widest planned)."""
    try:
        components = fmt.components if fmt is not None else ()
    except Exception:  # noqa: BLE001 - an odd PyAV object: plan the widest format
        components = ()
    if not components:
        return width * height * UNKNOWN_FORMAT_BYTES
    depth = max(math.ceil(c.bits / 8) for c in components)
    # Each component's samples at this size (the format object's own size may be another's),
    # planar or interleaved (NV12's chroma plane holds two).
    chroma = fmt.chroma_width(width) * fmt.chroma_height(height)
    samples = sum(chroma if c.is_chroma else width * height for c in components) * depth
    # Padding bytes no component names (bgr0, 0rgb: 4 bytes a pixel for 3 components).
    return max(samples, math.ceil(width * height * fmt.padded_bits_per_pixel / 8))


def decoder_threads(threads: int | None) -> int:
    """Frames held by the decoder's frame threads: none for PyAV's default slice threads."""
    if threads is None or threads == 1:
        return 0
    return threads if threads > 1 else (os.cpu_count() or 1)


def video_decode_bytes(pixel_format: str | None, width: int, height: int, sampled: int,
                       repeats: bool, threads: int | None) -> int:
    """Decode memory planned for ``sampled`` distinct frames of a width x height stream.

    ``repeats``: an index is sampled twice, so every converted frame is kept until handed out."""
    frame = frame_bytes(pixel_format, width, height)
    rgb = width * height * RGB_BYTES
    n = decoder_threads(threads)  # frame threads, or decoders of their own (parallel_decode.py)
    held = frame * (sampled + REFERENCE_FRAMES * max(1, n) + n)
    return held + rgb * (sampled if repeats else 1) + DECODER_STATE_BYTES
