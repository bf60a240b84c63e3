"""Decode memory planned from an image's header: what its decode may hold at its peak.

The server budgets it across requests (--max-decode-mb) before anything is decoded."""

from __future__ import annotations

import os

from PIL import Image

# Bytes Pillow keeps per decoded pixel for RGB, RGBA, CMYK, I and F (the widest modes); the native
# decoders write 3 or 4 (a PNG row also its filter byte).
PIXEL_BYTES = 4
# A decoder's own state, line buffers and allocator slack per image.
DECODER_STATE_BYTES = 2 << 20
# Modes the native core reads as decoded, converting while it reads (pixels.py).
NATIVE_MODES = ("RGB", "L", "LA", "RGBA")


def decode_bytes(width: int, height: int, copies: int, encoded: int = 0) -> int:
    """Decode memory planned for a width x height image.

    Its decode holds ``copies`` full images of PIXEL_BYTES a pixel at once, and may copy its
    ``encoded`` bytes (a PNG's joined IDAT chunks, a file read into memory)."""
    return width * height * PIXEL_BYTES * copies + encoded + DECODER_STATE_BYTES


def decode_copies(img: Image.Image, hf: bool, turns: bool) -> int:
    """Full-size images a decode of img (header read) holds at once, at most.

    1 when its pixels are read as decoded; 2 when Pillow converts its mode or turns it (``turns``:
    an EXIF orientation to apply); 6 when it composites a transparency key or an alpha band onto
    white (the decoded image, its RGB conversion, the RGBA, the white canvas, their composite and
    its RGB)."""
    key = img.info.get("transparency") is not None
    if hf and (key or ("A" in img.getbands() and img.mode not in NATIVE_MODES)):
        return 6
    return 2 if key or turns or img.mode not in NATIVE_MODES else 1


def encoded_size(data: bytes | None, path: str | None) -> int:
    """The encoded image's size in bytes (0 when its file cannot be read: decoding says why)."""
    if data is not None:
        return len(data)
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return 0
