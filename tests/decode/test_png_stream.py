"""The PNG fast path's own work, against Pillow.

Every row filter (None, Sub, Up, Average, Paeth) at 1, 3 and 4 bytes per pixel, through both
inflaters (zlib-ng, zlib), and every way the zlib stream or the filter bytes can be wrong: the fast
path returns pixels only for a whole, valid image (then Pillow's, bit for bit) and otherwise hands
the file to Pillow, which decides."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from support.decode_common import check, chunk, filter_rows, write_png

from smg_fast import _native
from smg_fast.imaging import decoders

PIL = decoders.PILLOW
INFLATERS = pytest.mark.parametrize("inflater", [decoders.ZLIB_NG, decoders.ZLIB])
CTYPES = {1: 0, 3: 2, 4: 6}  # bytes per pixel -> IHDR colour type


@pytest.fixture
def use(monkeypatch):
    """Makes the given inflater the one the fast path uses."""

    def pick(inflater: str) -> None:
        monkeypatch.setattr(decoders, "_checked", {})
        if inflater == decoders.ZLIB:
            monkeypatch.setattr(decoders, "_zlib_ng", None)
        assert decoders.png_decoder() == inflater

    return pick


def samples(h: int, w: int, c: int, seed: int) -> np.ndarray:
    # Smooth gradients plus noise: every Paeth branch (a, b and c) gets taken.
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = (x[..., None] * (3 + np.arange(c)) + y[..., None] * 5) % 256
    return ((base + rng.integers(0, 24, (h, w, c))) % 256).astype(np.uint8)


def _ihdr_stream(data: bytes, stream: bytes) -> bytes:
    """data with its (single) IDAT chunk replaced by one holding stream."""
    at = data.index(b"IDAT") - 4
    end = at + 12 + int.from_bytes(data[at:at + 4], "big")
    return data[:at] + chunk(b"IDAT", stream) + data[end:]


@INFLATERS
@pytest.mark.parametrize("bpp", [1, 3, 4])
@pytest.mark.parametrize("ftype", [0, 1, 2, 3, 4])
def test_each_filter(use, inflater, bpp, ftype):
    use(inflater)
    img = samples(23, 37, bpp, ftype)
    check(write_png(img, CTYPES[bpp], 8, filters=[ftype] * 23), True, inflater)


@INFLATERS
@pytest.mark.parametrize("bpp", [1, 3, 4])
@pytest.mark.parametrize("size", [(1, 1), (1, 2), (2, 1), (5, 3), (64, 41)])
def test_mixed_filters_and_sizes(use, inflater, bpp, size):
    use(inflater)
    w, h = size
    rng = np.random.default_rng(w * 100 + h)
    img = samples(h, w, bpp, 7)
    data = write_png(img, CTYPES[bpp], 8, filters=list(rng.integers(0, 5, h)), idat_split=7)
    check(data, True, inflater)
    check(data, False, inflater)


def test_paeth_ties_and_extremes(use):
    use(decoders.ZLIB_NG)
    # Rows of 0/255 and repeated values make pa == pb == pc ties and the largest differences.
    rng = np.random.default_rng(3)
    for c in (1, 3, 4):
        img = (rng.integers(0, 2, (9, 33, c)) * 255).astype(np.uint8)
        img[::3] = 128
        check(write_png(img, CTYPES[c], 8, filters=[4] * 9), True, decoders.ZLIB_NG)


@INFLATERS
@pytest.mark.parametrize("bad", [5, 255])
def test_unknown_filter_type_is_pillows(use, inflater, bad):
    use(inflater)
    rows = filter_rows(samples(6, 10, 3, 1).reshape(6, 30), 3, [4] * 6)
    rows[3] = bytes([bad]) + rows[3][1:]
    data = _ihdr_stream(write_png(samples(6, 10, 3, 1), 2, 8), zlib.compress(b"".join(rows)))
    assert check(data, True, PIL) is not None  # Pillow refuses it: so do we


@INFLATERS
@pytest.mark.parametrize("case", ["one-row-short", "one-byte-long", "extra-row", "bad-adler",
                                  "cut-stream", "garbage-after-stream", "raw-deflate"])
def test_stream_not_one_whole_image(use, inflater, case):
    use(inflater)
    img = samples(8, 12, 3, 2)
    good = write_png(img, 2, 8)
    raw = b"".join(filter_rows(img.reshape(8, 36), 3, [0] * 8))
    stream = {
        "one-row-short": zlib.compress(raw[:-37]),
        "one-byte-long": zlib.compress(raw + b"\0"),
        "extra-row": zlib.compress(raw + raw[:37]),
        "bad-adler": zlib.compress(raw)[:-1] + bytes([zlib.compress(raw)[-1] ^ 1]),
        "cut-stream": zlib.compress(raw)[:-6],
        "garbage-after-stream": zlib.compress(raw) + b"garbage",
        "raw-deflate": zlib.compress(raw)[2:-4],
    }[case]
    data = _ihdr_stream(good, stream)
    fast_ok = case == "garbage-after-stream"  # the stream is whole; what follows it is unread
    check(data, True, inflater if fast_ok else PIL)
    check(data, False, inflater if fast_ok else PIL)


@INFLATERS
def test_a_bomb_stops_at_the_image_size(use, inflater):
    use(inflater)
    img = samples(4, 4, 3, 0)
    bomb = zlib.compress(b"\0" * (64 << 20), 9)  # 64 MiB of zeros for a 4x4 image
    check(_ihdr_stream(write_png(img, 2, 8), bomb), True, PIL)


def test_split_and_empty_idat_chunks(use):
    use(decoders.ZLIB_NG)
    img = samples(20, 30, 4, 5)
    data = write_png(img, 6, 8, filters=[4, 3, 2, 1, 0] * 4, idat_split=1)
    at = data.index(b"IDAT") - 4
    data = data[:at] + chunk(b"IDAT", b"") + data[at:]  # a zero-length IDAT first
    check(data, True, decoders.ZLIB_NG)


def test_second_idat_run_is_pillows(use):
    use(decoders.ZLIB_NG)
    img = samples(10, 10, 3, 4)
    data = write_png(img, 2, 8, idat_split=40)
    first = data.index(b"IDAT") - 4
    second = first + 12 + int.from_bytes(data[first:first + 4], "big")
    data = data[:second] + chunk(b"tEXt", b"k\0v") + data[second:]
    check(data, True, PIL)  # Pillow stops at the tEXt: a truncated image it refuses


def test_native_unfilter_checks_its_arguments():
    buf = _native.pooled_empty(2 * (1 + 6))
    buf[:] = 0
    assert _native.png_unfilter(buf, 2, 6, 3)
    for args in ((buf, 3, 6, 3), (buf, 0, 6, 3), (buf, 2, 0, 3), (buf, 2, 6, 0), (buf, 2, 6, 9)):
        with pytest.raises(ValueError):
            _native.png_unfilter(*args)
    ro = np.zeros(14, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        _native.png_unfilter(ro, 2, 6, 3)
    with pytest.raises(ValueError):
        _native.png_unfilter(np.zeros(28, np.uint8)[::2], 2, 6, 3)


class _Bits:
    """A deflate bit writer (RFC 1951 3.1.1): fields LSB first, Huffman codes MSB first."""

    def __init__(self) -> None:
        self.acc, self.n = 0, 0

    def put(self, value: int, nbits: int) -> None:
        self.acc |= value << self.n
        self.n += nbits

    def code(self, code: int, nbits: int) -> None:
        self.put(int(f"{code:0{nbits}b}"[::-1], 2), nbits)

    def bytes(self) -> bytes:
        return self.acc.to_bytes((self.n + 7) // 8, "little")


@INFLATERS
def test_stream_only_a_lenient_inflater_takes_is_refused(use, inflater):
    """A fixed-Huffman block using length symbol 286, which RFC 1951 reserves.

    Zlib (Pillow's inflater) refuses it; libdeflate would read it as length 258 and return pixels.
    """
    use(inflater)
    bits = _Bits()
    bits.put(1, 1)  # BFINAL
    bits.put(1, 2)  # fixed Huffman codes
    bits.code(0b00110000, 8)  # literal 0: the row's filter byte
    bits.code(0b00110000 + 77, 8)  # literal 77: the first pixel
    bits.code(0b11000000 + 6, 8)  # symbol 286
    bits.put(0, 5)  # distance code 0: distance 1
    bits.code(0, 7)  # end of block
    row = bytes([0]) + bytes([77]) * 259
    stream = b"\x78\x01" + bits.bytes() + zlib.adler32(row).to_bytes(4, "big")
    data = _ihdr_stream(write_png(np.zeros((1, 259, 1), np.uint8), 0, 8), stream)
    assert check(data, True, PIL) is not None  # Pillow refuses it: so do we
    assert check(data, False, PIL) is not None


def _ihdr(w: int, h: int, depth: int, ctype: int, interlace: int) -> bytes:
    return chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))


@pytest.mark.parametrize("second", [(1, 8, 8, 2, 1), (1, 4, 4, 0, 0), (1, 8, 8, 2, 0)],
                         ids=["interlaced", "4-bit", "same"])
def test_second_header_is_pillows(use, second):
    """Pillow reads every IHDR before the image data (the last one wins).

    The fast path reads only the first, so any file with two is Pillow's."""
    use(decoders.ZLIB_NG)
    w, h, depth, ctype, interlace = second
    first = _ihdr(w, h, 8, ctype, 0)
    if depth == 8:  # 8 rows of one RGB pixel: the same length read plainly or as Adam7
        rows = [bytes([0]) + bytes([10 * y, 10 * y + 1, 10 * y + 2]) for y in range(h)]
    else:  # 4 rows of one 8-bit grey pixel: the same length as 4-bit rows
        rows = [bytes([0, 90 + y]) for y in range(h)]
    data = (b"\x89PNG\r\n\x1a\n" + first + _ihdr(w, h, depth, ctype, interlace)
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    check(data, True, PIL)
    check(data, False, PIL)


def test_image_data_after_iend_is_pillows(use):
    """IHDR, IEND, then IDAT: Pillow reads nothing past IEND (and refuses the file)."""
    use(decoders.ZLIB_NG)
    good = write_png(samples(4, 3, 3, 6), 2, 8)
    at = good.index(b"IDAT") - 4
    data = good[:at] + chunk(b"IEND", b"") + good[at:]
    assert check(data, True, PIL) is not None
    assert check(data, False, PIL) is not None
