"""PNG chunk reading for the fast path.

The header, the chunk list, the image data's zlib stream. Pure parsing of the bytes, as Pillow's
PngImagePlugin reads them (what it stops at, what it does not check)."""

from __future__ import annotations

import struct

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# IHDR colour types the fast path takes, and their bytes per pixel: grey, RGB, RGBA (8-bit).
_PNG_CHANNELS = {0: 1, 2: 3, 6: 4}


def png_header(data: bytes) -> tuple[int, int, int, int, int] | None:
    """(width, height, bit depth, colour type, interlace) from the IHDR chunk, or None."""
    if len(data) < 33 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height, depth, ctype, _comp, _filt, interlace = struct.unpack(">IIBBBBB", data[16:29])
    return width, height, depth, ctype, interlace


def png_channels(data: bytes, width: int, height: int) -> int | None:
    """Channels of a PNG the fast path takes, else None.

    1, 3 or 4: 8-bit grey, RGB or RGBA, not interlaced, with the standard compression and filter
    methods."""
    if len(data) < 33 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    w, h, depth, ctype, comp, filt, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if (w, h) != (width, height) or depth != 8 or comp or filt or interlace:
        return None
    return _PNG_CHANNELS.get(ctype)


def idat_stream(data: bytes, start: int | None = None) -> bytes | memoryview | None:
    """The zlib stream.

    The data of the first run of IDAT chunks (Pillow stops reading image data at the first other
    chunk), or None when there is none, or when its data does not begin at start (where Pillow's
    reader begins, when given). CRCs are not checked: Pillow does not check those of IDAT chunks
    either."""
    pos, parts = 8, []
    view = memoryview(data)
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind == b"IDAT":
            if pos + 8 + length > len(data) or (not parts and start not in (None, pos + 8)):
                return None
            parts.append(view[pos + 8:pos + 8 + length])
        elif parts or kind == b"IEND":  # Pillow reads nothing past IEND
            break
        pos += 12 + length
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else b"".join(parts)


# APNG: Pillow reads the default image within its frame control (or refuses a bad one); the fast
# path would decode IDAT as a still image.
ANIMATION = {"acTL", "fcTL", "fdAT"}


def png_chunks(data: bytes) -> set[str] | None:
    """The chunk types of a PNG up to IEND, or None when the chunks do not parse up to an IEND.

    The set also holds "after pixels" when a chunk other than IEND follows its image data (Pillow
    reads those, an eXIf or XMP orientation among them, only after decoding) and "repeated header"
    for a second IHDR."""
    pos, seen_idat, kinds = 8, False, set()
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        name = kind.decode("latin-1")
        if kind == b"IEND":
            return kinds
        if kind == b"IHDR" and name in kinds:
            kinds.add("repeated header")  # Pillow reads each one, the fast path only the first
        kinds.add(name)
        if kind == b"IDAT":
            seen_idat = True
        elif seen_idat:
            kinds.add("after pixels")
        pos += 12 + length
    return None
