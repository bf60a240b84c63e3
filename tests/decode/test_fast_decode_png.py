"""The PNG fast path against Pillow and transformers' loading.

The fast path: zlib-ng or zlib inflating, the native core unfiltering. The 8-bit grey / RGB / RGBA
cases it takes are exact; every other PNG (other depths, palettes, transparency keys, grey+alpha,
Adam7) is Pillow's; broken files fail exactly where the reference fails."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, ImageCms, PngImagePlugin
from support.decode_common import HF, check, chunk, reference, write_png
from support.images import encode

from smg_fast.imaging import decoders, png_chunks

FAST, PIL = decoders.ZLIB_NG, decoders.PILLOW


def png(img: Image.Image, **kw) -> bytes:
    return encode(img, "PNG", **kw)


@pytest.fixture(scope="module")
def rgba(real_images) -> Image.Image:
    return real_images.mode_image("RGBA")


def test_fast_decoder_is_installed():
    assert decoders.available()[FAST], "the test extra installs imagecodecs (zlib-ng)"
    assert decoders.png_decoder() == FAST


@HF
def test_rgb_and_grey(chelsea, hf):
    check(png(chelsea), hf, FAST)
    check(png(chelsea, compress_level=0), hf, FAST)
    check(png(chelsea.convert("L")), hf, FAST)


@HF
def test_shipped_pngs(real_images, hf):
    for name in ("astronaut", "chelsea", "coffee", "camera"):
        check(real_images.bytes(name), hf, FAST)
    for name in ("logo", "logo2"):  # RGBA: load_image and Kimi's convert("RGB") drop alpha
        check(real_images.bytes(name), hf, FAST)


@HF
def test_rgba(rgba, hf):
    check(png(rgba), hf, FAST)


@HF
@pytest.mark.parametrize("mode", ["LA", "P", "P_transparency", "RGB_colorkey", "1", "I;16"])
def test_other_modes_take_pillow(real_images, hf, mode):
    check(png(real_images.mode_image(mode)), hf, PIL)


@HF
@pytest.mark.parametrize("depth", [1, 2, 4, 16])
def test_grey_depths_take_pillow(chelsea, hf, depth):
    grey = np.asarray(chelsea.convert("L"), dtype=np.uint16)[:, :, None]
    samples = grey * 257 if depth == 16 else grey >> (8 - depth)
    check(write_png(samples, 0, depth), hf, PIL)


@HF
@pytest.mark.parametrize("ctype,channels", [(2, 3), (6, 4)])
def test_16_bit_colour_takes_pillow(chelsea, hf, ctype, channels):
    rgb = np.asarray(chelsea, dtype=np.uint16)
    samples = rgb * 257 + 3 if channels == 3 else np.dstack([rgb * 257 + 3, rgb[:, :, :1] * 200])
    check(write_png(samples, ctype, 16), hf, PIL)


@HF
def test_adam7_interlaced_takes_pillow(chelsea, hf):
    data = write_png(np.asarray(chelsea.crop((0, 0, 37, 23))), 2, 8, interlace=True)
    assert png_chunks.png_header(data)[4] == 1
    check(data, hf, PIL)


@HF
def test_hand_written_8_bit_files(chelsea, hf):
    rgb = np.asarray(chelsea)
    check(write_png(rgb, 2, 8), hf, FAST)
    check(write_png(rgb[:, :, :1], 0, 8), hf, FAST)


@HF
def test_gamma_and_icc_chunks_are_ignored(chelsea, hf):
    info = PngImagePlugin.PngInfo()
    info.add(b"gAMA", (100000).to_bytes(4, "big"))  # gamma 1.0: a decoder applying it would differ
    check(png(chelsea, pnginfo=info), hf, FAST)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()
    check(png(chelsea, icc_profile=icc), hf, FAST)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_before_the_pixels(chelsea, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = png(chelsea, exif=exif.tobytes())
    assert data.index(b"eXIf") < data.index(b"IDAT")
    check(data, True, FAST)  # Qwen turns it as load_image does
    check(data, False, FAST)  # Kimi ignores it


def test_exif_after_the_pixels_is_pillows(chelsea):
    exif = Image.Exif()
    exif[0x0112] = 6
    data = write_png(np.asarray(chelsea), 2, 8)
    iend = data.rindex(b"IEND") - 4
    data = data[:iend] + chunk(b"eXIf", exif.tobytes()) + data[iend:]
    assert reference(data, True).shape[:2] == (chelsea.width, chelsea.height)  # it does turn
    check(data, True, PIL)
    check(data, False, PIL)  # any chunk after the pixels is Pillow's (it may refuse it)


@HF
@pytest.mark.parametrize("size", [(1, 1), (1, 37), (37, 1), (17, 9)])
def test_odd_sizes(chelsea, hf, size):
    check(png(chelsea.resize(size)), hf, FAST)


@HF
@pytest.mark.parametrize("cut", [0.2, 0.7, -12, -4])
def test_truncated(chelsea, hf, cut):
    data = png(chelsea)
    end = int(len(data) * cut) if isinstance(cut, float) else len(data) + cut
    # -12: no IEND; -4: IEND without its CRC: the pixels are whole, and Pillow keeps them.
    # (With no IEND the chunks are not all known, so Pillow decodes.)
    check(data[:end], hf, FAST if cut == -4 else PIL)


@HF
def test_corrupt_data_and_crc(chelsea, hf):
    data = bytearray(png(chelsea))
    at = data.index(b"IDAT") + 400
    data[at] ^= 0x21
    check(bytes(data), hf, PIL)  # the stream's checksum fails: Pillow decides (it refuses)


@HF
def test_idat_crc_error_alone(chelsea, hf):
    data = bytearray(png(chelsea))
    at = data.index(b"IDAT")
    end = at + 4 + int.from_bytes(data[at - 4:at], "big")
    data[end] ^= 0x5A  # the chunk's CRC only: Pillow does not check it, and decodes
    assert check(bytes(data), hf, FAST) is None


@HF
def test_trailing_garbage(chelsea, hf):
    data = png(chelsea) + b"garbage after IEND"
    err = check(data, hf, FAST)
    assert err is None


def test_without_imagecodecs_zlib_inflates(chelsea, rgba, monkeypatch):
    monkeypatch.setattr(decoders, "_zlib_ng", None)
    monkeypatch.setattr(decoders, "_checked", {})  # as in a fresh process
    assert decoders.png_decoder() == decoders.ZLIB
    for data in (png(chelsea), png(chelsea.convert("L")), png(rgba)):
        check(data, True, decoders.ZLIB)
        check(data, False, decoders.ZLIB)
    assert check(png(chelsea)[:-40], True, PIL) is not None  # truncated: both refuse


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _with_chunks(chelsea: Image.Image, *chunks: tuple[bytes, bytes]) -> bytes:
    return write_png(np.asarray(chelsea.crop((0, 0, 29, 17))), 2, 8, extra=chunks)


def test_raw_profile_exif_text_is_pillows(chelsea):
    """Pillow's getexif falls back to ImageMagick's "Raw profile type exif" text chunk.

    An orientation there turns the image under Qwen."""
    ex = _exif(6)
    text = b"Raw profile type exif\0" + f"\nexif\n{len(ex):8d}\n{ex.hex()}\n".encode()
    data = _with_chunks(chelsea, (b"tEXt", text))
    assert reference(data, True).shape[:2] == (29, 17)
    check(data, True, PIL)
    check(data, False, FAST)


def test_unreadable_exif_is_pillows(chelsea):
    data = _with_chunks(chelsea, (b"eXIf", b"XXXXXXXXXXXXXXXX"))
    check(data, True, PIL)  # transformers' load_image raises on it: so do we


@HF
@pytest.mark.parametrize("frames,region", [(1, (3, 4, 1, 1)), (1, (29, 17, 0, 0))])
def test_apng_is_pillows(chelsea, hf, frames, region):
    w, h, x, y = region
    fctl = struct.pack(">IIIIIHHBB", 0, w, h, x, y, 1, 10, 0, 0)
    data = _with_chunks(chelsea, (b"acTL", struct.pack(">II", frames, 0)), (b"fcTL", fctl))
    check(data, hf, PIL)


def _exif_entry(kind: int, count: int, value: bytes, extra: bytes = b"") -> bytes:
    """A little-endian TIFF block with one IFD entry: Orientation of the given TIFF type."""
    ifd = struct.pack("<HHHI", 1, 0x0112, kind, count) + value.ljust(4, b"\0") + b"\0" * 4
    return b"II*\0" + struct.pack("<I", 8) + ifd + extra


@pytest.mark.parametrize("block", [
    _exif_entry(2, 2, b"6\0"),  # ASCII "6": exif_transpose does not turn it
    _exif_entry(5, 1, struct.pack("<I", 26), struct.pack("<II", 13, 2)),  # RATIONAL 13/2
    _exif_entry(5, 1, struct.pack("<I", 26), struct.pack("<II", 6, 1)),  # RATIONAL 6/1: turns
    _exif_entry(3, 1, struct.pack("<H", 6)),  # SHORT 6: the ordinary case, turns
], ids=["ascii", "rational-13/2", "rational-6/1", "short"])
def test_orientation_of_other_tiff_types(chelsea, block):
    png_data = _with_chunks(chelsea, (b"eXIf", block))
    jpeg = io.BytesIO()
    chelsea.crop((0, 0, 29, 17)).save(jpeg, "JPEG", quality=90, exif=b"Exif\0\0" + block)
    plain = block == _exif_entry(3, 1, struct.pack("<H", 6))
    for data, fast in ((png_data, FAST), (jpeg.getvalue(), decoders.LIBJPEG_TURBO)):
        check(data, True, fast if plain else PIL)


@HF
@pytest.mark.parametrize("after", [
    chunk(b"zTXt", b"k\0\1" + zlib.compress(b"x")),  # compression method 1: SyntaxError
    chunk(b"pHYs", b"\0\1"),  # truncated: ValueError
    chunk(b"gAMA", b"\0"),
    chunk(b"tEXt", b"comment\0made after the pixels"),  # harmless, still Pillow's to read
], ids=["ztxt-method", "phys-short", "gama-short", "text"])
def test_chunks_after_the_pixels_are_pillows(chelsea, hf, after):
    data = write_png(np.asarray(chelsea.crop((0, 0, 29, 17))), 2, 8)
    iend = data.rindex(b"IEND") - 4
    check(data[:iend] + after + data[iend:], hf, PIL)


def test_a_png_path_that_differs_is_switched_off(chelsea, monkeypatch, caplog):
    from smg_fast import _native

    monkeypatch.setattr(decoders, "_checked", {})  # as in a fresh process
    real = _native.png_unfilter

    def off_by_one(data, *args):
        ok = real(data, *args)
        data[1] ^= 1
        return ok

    monkeypatch.setattr(_native, "png_unfilter", off_by_one)
    check(png(chelsea), True, PIL)
    assert decoders.png_decoder() is None
    assert not decoders.available()[decoders.ZLIB_NG] and not decoders.available()[decoders.ZLIB]
    assert "does not reproduce Pillow's pixels" in caplog.text
