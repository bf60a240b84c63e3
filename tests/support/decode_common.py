"""Helpers of the fast-decoder tests (test_fast_decode_*.py).

The reference decode through Pillow and transformers' own loading, the comparison that also names
the decoder that ran, and a small PNG writer for the bit depths, colour types and interlacing
Pillow's encoder cannot make."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from smg_fast.errors import InvalidImageError
from smg_fast.imaging.media import open_image

# Each case runs through both references: the Qwen (transformers) and Kimi (upstream) processors.
HF = pytest.mark.parametrize("hf", [True, False], ids=["qwen", "kimi"])


def reference(data: bytes, hf: bool) -> np.ndarray:
    """What the references feed the resize.

    Transformers' load_image + convert_to_rgb (Qwen), or Pillow's convert("RGB") (upstream Kimi)."""
    img = Image.open(io.BytesIO(data))
    if hf:
        from transformers.image_transforms import convert_to_rgb
        from transformers.image_utils import load_image

        return np.asarray(convert_to_rgb(load_image(img)))
    return np.asarray(img.convert("RGB"))


def ours(data: bytes, hf: bool) -> tuple[np.ndarray, str | None]:
    header = open_image(0, data, hf=hf, max_pixels=None)
    return header.decode().to_rgb()[..., :3], header.decoder


def check(data: bytes, hf: bool, decoder: str) -> BaseException | None:
    """Ours equals the reference, bit for bit, and ran the named decoder.

    Or both refuse (the reference's exception is returned)."""
    try:
        want = reference(data, hf)
    except Exception as exc:  # noqa: BLE001 - whatever Pillow raises, we must refuse too
        with pytest.raises(InvalidImageError):
            ours(data, hf)
        return exc
    got, ran = ours(data, hf)
    assert ran == decoder
    assert got.shape == want.shape
    assert np.array_equal(got, want)
    return None


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _pack_rows(a: np.ndarray, depth: int) -> list[bytes]:
    """Rows of samples (H, W*C) at a bit depth, each with filter byte 0."""
    if depth == 16:
        a = a.astype(">u2")
        return [b"\0" + row.tobytes() for row in a]
    if depth == 8:
        return [b"\0" + row.astype(np.uint8).tobytes() for row in a]
    per = 8 // depth
    rows = []
    for row in a:
        padded = np.zeros(-(-len(row) // per) * per, np.uint8)
        padded[: len(row)] = row
        groups = padded.reshape(-1, per)
        shifts = np.arange(per - 1, -1, -1) * depth
        rows.append(b"\0" + (groups << shifts).sum(axis=1).astype(np.uint8).tobytes())
    return rows


_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))


def _paeth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    pa, pb, pc = np.abs(b - c), np.abs(a - c), np.abs(a + b - 2 * c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def filter_rows(rows: np.ndarray, bpp: int, types: list[int]) -> list[bytes]:
    """The PNG encoder's filtering of 8-bit rows, written from the spec.

    Rows (H, W*C) with the PNG filter types[y] applied to row y (PNG spec 9.2-9.4), each prefixed
    with its filter byte."""
    x = rows.astype(np.int32)
    out = []
    for y, t in enumerate(types):
        up = x[y - 1] if y else np.zeros_like(x[y])
        left = np.concatenate([np.zeros(bpp, np.int32), x[y][:-bpp]])[: x.shape[1]]
        upleft = np.concatenate([np.zeros(bpp, np.int32), up[:-bpp]])[: x.shape[1]]
        pred = {0: 0, 1: left, 2: up, 3: (left + up) // 2, 4: _paeth(left, up, upleft)}.get(t, 0)
        out.append(bytes([t]) + ((x[y] - pred) & 0xFF).astype(np.uint8).tobytes())
    return out


def write_png(samples: np.ndarray, ctype: int, depth: int, *, interlace: bool = False,
              extra: tuple[tuple[bytes, bytes], ...] = (), palette: bytes | None = None,
              filters: list[int] | None = None, idat_split: int = 0) -> bytes:
    """A PNG of samples (H, W, C) with the given colour type and depth.

    Extra chunks go before IDAT. filters: each row's filter type (8-bit, not interlaced; default 0);
    idat_split: the zlib stream cut into IDAT chunks of this many bytes (0: one chunk)."""
    h, w, c = samples.shape
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    rows: list[bytes] = []
    if filters is not None:
        assert depth == 8 and not interlace
        rows = filter_rows(samples.reshape(h, w * c), c, filters)
    elif interlace:
        for x0, y0, dx, dy in _ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.size:
                rows += _pack_rows(sub.reshape(sub.shape[0], -1), depth)
    else:
        rows = _pack_rows(samples.reshape(h, w * c), depth)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if palette is not None:
        out += chunk(b"PLTE", palette)
    for kind, body in extra:
        out += chunk(kind, body)
    stream = zlib.compress(b"".join(rows), 6)
    step = idat_split or len(stream)
    for at in range(0, len(stream), step):
        out += chunk(b"IDAT", stream[at:at + step])
    return out + chunk(b"IEND", b"")
