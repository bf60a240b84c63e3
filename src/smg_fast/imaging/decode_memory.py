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
# Full-size images Pillow's own decode holds besides the one it returns (measured: its decoder's
# output and a converted or unpacked copy: 16-bit PNG, CMYK JPEG, TIFF, GIF, BMP, LA).
PILLOW_EXTRA_COPIES = 2
# Pillow decodes every WebP through its animation decoder: RGBA canvases and a copy of the frame.
WEBP_EXTRA_COPIES = 4
# Bytes per pixel and component of libjpeg's whole-image coefficient buffer (a progressive JPEG).
COEFFICIENT_BYTES = 2


def decode_bytes(width: int, height: int, copies: int, encoded: int = 0, per_pixel: int = 0
                 ) -> int:
    """Decode memory planned for a width x height image.

    Its decode holds ``copies`` full images of PIXEL_BYTES a pixel at once plus ``per_pixel``
    bytes a pixel of decoder buffers, and may copy its ``encoded`` bytes (a PNG's joined IDAT
    chunks, a file read into memory)."""
    return width * height * (PIXEL_BYTES * copies + per_pixel) + encoded + DECODER_STATE_BYTES


def decode_copies(img: Image.Image, hf: bool, turns: bool, native: bool = False) -> int:
    """Full-size images a decode of img (header read) holds at once, at most.

    Reading them: 1 when its pixels are read as decoded; 2 when they are converted or turned
    (``turns``: an EXIF orientation to apply); 6 when a transparency key or an alpha band is
    composited onto white (the decoded image, its RGB conversion, the RGBA, the white canvas,
    their composite and its RGB). Decoding them: nothing more for a native decoder (``native``),
    else Pillow's own copies (PILLOW_EXTRA_COPIES, WEBP_EXTRA_COPIES)."""
    key = img.info.get("transparency") is not None
    if hf and (key or ("A" in img.getbands() and img.mode not in NATIVE_MODES)):
        reading = 6
    else:
        reading = 2 if key or turns or img.mode not in NATIVE_MODES else 1
    if native:
        return reading
    return reading + (WEBP_EXTRA_COPIES if img.format == "WEBP" else PILLOW_EXTRA_COPIES)


def decoder_bytes_per_pixel(img: Image.Image) -> int:
    """Bytes per pixel a decoder of img holds besides full images.

    A progressive JPEG's coefficients, each component's, whichever decoder reads it."""
    if img.format in ("JPEG", "MPO") and img.info.get("progressive"):
        return COEFFICIENT_BYTES * len(img.getbands())
    return 0


def encoded_size(data: bytes | None, path: str | None) -> int:
    """The encoded image's size in bytes (0 when its file cannot be read: decoding says why)."""
    if data is not None:
        return len(data)
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return 0
