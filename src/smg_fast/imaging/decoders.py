"""Fast decoders for the two formats that carry nearly all VLM traffic, bit-identical to Pillow.

JPEG: libjpeg-turbo with Pillow's settings (accurate integer IDCT, fancy upsampling), output
straight into a pooled buffer, GIL released: the very libjpeg Pillow loaded, driven by the native
core (a large baseline image, 256+ rows and 512 x 512+ pixels, is decoded in two row bands on
two threads when the process does no other native work), or, where the core cannot bind it
(built without jpeglib.h, a Pillow without a 6.2-ABI libjpeg), simplejpeg's copy of libjpeg-turbo.

PNG: the image data inflated by zlib-ng (through imagecodecs, the optional extra
``pip install smg-fast[png]``; the inflater Pillow's own wheels use) or, without it, by Python's
zlib, then the row filters undone by the native core, in place in a pooled buffer; GIL released
throughout. Inflating and unfiltering are lossless and these inflaters refuse what Pillow's
refuses, so a stream has one result, Pillow's; the JPEG path decodes the same bytes with the same
library (or release) and settings as Pillow, and the tests compare both with Pillow on every run.

A fast decoder only takes the cases it reproduces exactly (JPEG in Pillow's RGB or L mode; 8-bit
grey / RGB / RGBA PNG without a transparency key, not interlaced); anything else, and any input
either path complains about (a JPEG warning in strict mode; a zlib stream that is not exactly one
image long or fails its checksum; a filter type outside 0-4), goes to Pillow, which then decodes
it, or raises, exactly as it always did. So a corrupt or truncated file fails, or not, where Pillow
does, and the fast path never returns pixels Pillow would not.
"""

from __future__ import annotations

import io
import logging
import os
import re
import threading
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from .. import _native
from .pixels import Pixels
from .png_chunks import ANIMATION, idat_stream, png_channels, png_chunks

try:  # a declared dependency; without it every JPEG takes Pillow's path
    import simplejpeg
except ImportError:  # pragma: no cover - exercised only in a broken install
    simplejpeg = None

try:  # optional extra "png": zlib-ng inflates about 3x faster than Python's zlib
    import imagecodecs

    _zlib_ng: Any = getattr(imagecodecs, "zlibng_decode", None)
except ImportError:
    _zlib_ng = None

log = logging.getLogger("smg_fast.imaging.decoders")

_F = _native.PixelFormat

PILLOW = "pillow"
LIBJPEG_TURBO = "libjpeg-turbo"
# The JPEG fast path's two engines (jpeg_engine()): Pillow's own libjpeg through the native core,
# or simplejpeg's bundled libjpeg-turbo.
PILLOW_LIBJPEG = "pillow-libjpeg"
SIMPLEJPEG = "simplejpeg"
# PNG: named by what inflates the image data (the native core undoes the filters either way).
# Not libdeflate, though faster: it decodes streams zlib refuses (length symbols 286-287, too
# many code lengths), where Pillow raises.
ZLIB_NG = "zlib-ng"
ZLIB = "zlib"

def available() -> dict[str, bool]:
    """Which fast decoders this install has and uses (False too when one failed its check)."""
    return {LIBJPEG_TURBO: jpeg_engine() is not None and _verified(LIBJPEG_TURBO),
            ZLIB_NG: _zlib_ng is not None and _verified(ZLIB_NG),
            ZLIB: _verified(ZLIB)}


_UNSET: Any = object()
_jpeg_engine: Any = _UNSET
_engine_lock = threading.Lock()
# A libjpeg with the 6.2 ABI (the one the native core's jpeglib.h describes), by file name:
# Pillow's wheels ship libjpeg-<hash>.so.62.x, distributions libjpeg.so.62.
_LIBJPEG62 = re.compile(r"libjpeg(-[0-9a-f]+)?\.so\.62(\.|$)")


def pillow_libjpeg_path() -> str | None:
    """The file of the libjpeg Pillow's _imaging module loaded (from /proc/self/maps).

    The 6.2-ABI libjpeg in Pillow's wheel folder (pillow.libs), else the only one mapped, else None.
    Another module's libjpeg taken by mistake is caught by the self-check against Pillow."""
    import PIL
    from PIL import _imaging  # noqa: F401 - loads Pillow's libjpeg, if it has one

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    mapped = {parts[5] for parts in (line.split(maxsplit=5) for line in lines if "libjpeg" in line)
              if len(parts) == 6}
    found = sorted(p for p in mapped
                   if _LIBJPEG62.match(os.path.basename(p)) and not p.endswith(" (deleted)"))
    # /proc/self/maps shows resolved paths: resolve the folder too (a symlinked site-packages)
    wheel = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(PIL.__file__)),
                                          "pillow.libs"))
    ours = [p for p in found if os.path.dirname(p) == wheel]
    return ours[0] if len(ours) == 1 else found[0] if len(found) == 1 else None


def jpeg_engine() -> str | None:
    """Which libjpeg-turbo the JPEG fast path drives on this install.

    PILLOW_LIBJPEG (Pillow's own library, through the native core; banded on two threads),
    SIMPLEJPEG, or None."""
    global _jpeg_engine
    if _jpeg_engine is _UNSET:
        with _engine_lock:
            if _jpeg_engine is _UNSET:
                path = pillow_libjpeg_path()
                why = (_native.jpeg_bind(path) if path else
                       "not exactly one libjpeg.so.62 loaded by Pillow")
                if why:
                    log.info("JPEG: not driving Pillow's libjpeg (%s)", why)
                _jpeg_engine = (PILLOW_LIBJPEG if not why else
                                SIMPLEJPEG if simplejpeg is not None else None)
    return _jpeg_engine


def png_decoder() -> str | None:
    """The PNG fast path's inflater on this install, or None.

    zlib-ng when imagecodecs is installed and passed its check, else Python's zlib; None when
    neither reproduces Pillow."""
    state = available()
    return ZLIB_NG if state[ZLIB_NG] else ZLIB if state[ZLIB] else None


# Each fast decoder is checked against Pillow once per process, before its first use, on images
# made here with Pillow's encoder: a library build that decodes differently (another
# libjpeg-turbo release, say) is switched off (logged) instead of changing anyone's pixels.
_checked: dict[str, bool] = {}
_check_lock = threading.Lock()


def _self_check(kind: str) -> bool:
    from .sample import sample_image

    rgb = Image.fromarray(sample_image(67, 45))
    rgba = rgb.copy()
    rgba.putalpha(rgb.convert("L"))
    cases = []
    for img in (rgb, rgb.convert("L")) + ((rgba,) if kind != LIBJPEG_TURBO else ()):
        for kw in ({"format": "PNG"},) if kind != LIBJPEG_TURBO else (
                {"format": "JPEG", "quality": 90},
                {"format": "JPEG", "quality": 75, "subsampling": 0, "progressive": True},
                {"format": "JPEG", "quality": 95, "subsampling": 1}):
            buf = io.BytesIO()
            img.save(buf, **kw)
            cases.append(buf.getvalue())
    for data in cases:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.width, im.height
            if kind == LIBJPEG_TURBO:
                want, got = np.asarray(im.convert("RGB")), decode_jpeg(data, w, h)
            else:  # the samples themselves (grey, RGB, RGBA)
                want = np.asarray(im).reshape(h, w, -1)
                got = decode_png(data, w, h, want.shape[2], kind)
        if got is None or not np.array_equal(got, want):
            return False
    if kind == LIBJPEG_TURBO and jpeg_engine() == PILLOW_LIBJPEG:
        # The row bands rest on this library's jpeg_skip_scanlines: forced here, on images of
        # many iMCU rows (16-row 4:2:0, 8-row 4:2:2, 4:4:4 and grey).
        tall = Image.fromarray(sample_image(40, 200))
        for img, sub in ((tall, 2), (tall, 1), (tall, 0), (tall.convert("L"), 0)):
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=90, subsampling=sub)
            with Image.open(buf) as im:
                want = np.asarray(im.convert("RGB"))
            got = np.empty_like(want)
            if (_native.jpeg_decode(buf.getvalue(), got, JPEG_BANDS_ALWAYS) != JPEG_BANDED
                    or not np.array_equal(got, want)):
                return False
    return True


def _verified(kind: str) -> bool:
    ok = _checked.get(kind)
    if ok is None:
        with _check_lock:
            ok = _checked.get(kind)
            if ok is None:
                try:
                    ok = _self_check(kind)
                except Exception:  # noqa: BLE001 - a broken library is one we do not use
                    log.exception("the %s fast decoder failed its self-check", kind)
                    ok = False
                if not ok:
                    log.warning("the %s fast decoder does not reproduce Pillow's pixels on this "
                                "install; Pillow decodes those images instead", kind)
                _checked[kind] = ok
    return ok


def _pooled(height: int, width: int, channels: int) -> np.ndarray:
    # Pre-faulted memory reused across calls: a fresh 6 MB array costs its page faults each time.
    return _native.pooled_empty(height * width * channels).reshape(height, width, channels)


# Arithmetic-coded frames (SOF9-11, SOF13-15). Pillow feeds libjpeg 64 KiB at a time and
# libjpeg's arithmetic decoder cannot suspend, so Pillow refuses such files once they outgrow one
# block ("broken data stream") while libjpeg-turbo given the whole buffer decodes them: they go
# to Pillow, so that an image fails exactly where the reference fails.
_ARITHMETIC_SOF = frozenset({0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def jpeg_frame_marker(data: bytes) -> int | None:
    """The SOFn marker byte (0xC0-0xCF) of a JPEG's first frame.

    None when the header ends, or a scan starts, before one."""
    pos = 2 if data[:2] == b"\xff\xd8" else len(data)
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return marker
        if marker == 0xDA or 0xD0 <= marker <= 0xD9:  # a scan, RSTn, SOI/EOI: no frame header
            return None
        pos += 2 + int.from_bytes(data[pos + 2:pos + 4], "big")
    return None


# _native.jpeg_decode's results: decoded whole, decoded in two bands, not a case it takes, libjpeg
# reported an error or a warning; and its bands argument: never, when the process is otherwise
# idle (and the image large enough), always (checks and tests).
JPEG_WHOLE, JPEG_BANDED, JPEG_DECLINED, JPEG_FAILED = range(4)
JPEG_BANDS_NEVER, JPEG_BANDS_IDLE, JPEG_BANDS_ALWAYS = range(3)
_no_bands = threading.local()


def decode_whole_in_this_thread() -> None:
    """JPEGs this thread decodes from now on are never split into bands.

    For the threads of a batch's decode pool, which already keep the cores busy with whole images.
    """
    _no_bands.set = True


def decode_jpeg(data: bytes, width: int, height: int) -> np.ndarray | None:
    """RGB uint8 (height, width, 3) as Pillow decodes (and converts to RGB) these bytes.

    None when the fast decoder does not reproduce them or reports anything wrong (Pillow
    decides)."""
    engine, marker = jpeg_engine(), jpeg_frame_marker(data)
    if engine is None or marker in _ARITHMETIC_SOF:
        return None
    if engine == PILLOW_LIBJPEG:
        out = _pooled(height, width, 3)
        # Bands only for sequential DCT frames (SOF0/SOF1): libjpeg cannot skip rows of a
        # lossless one, and a progressive one must be entropy-decoded whole anyway.
        bands = (JPEG_BANDS_IDLE if marker in (0xC0, 0xC1) and not getattr(_no_bands, "set", False)
                 else JPEG_BANDS_NEVER)
        return out if _native.jpeg_decode(data, out, bands) in (JPEG_WHOLE, JPEG_BANDED) else None
    try:
        h, w, _colorspace, _sub = simplejpeg.decode_jpeg_header(data, strict=True)
        if (w, h) != (width, height):
            return None
        out = _pooled(h, w, 3)
        return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False,
                                      buffer=out, strict=True)
    except (ValueError, TypeError):  # corrupt, truncated, or a colour space it will not give
        return None


# Pipeline.run bound to one image's output: (src, jpeg bytes) -> jpeg_decode's status.
RunJpeg = Callable[[np.ndarray, bytes], int]


def decode_jpeg_running(data: bytes, width: int, height: int, run: RunJpeg) -> bool | None:
    """Decodes data natively inside run, which computes on the rows already decoded meanwhile.

    True when the native decoder decoded data (as decode_jpeg would); False where decode_jpeg would
    return None (run's output is then incomplete); None, run not called, where decode_jpeg would not
    use the native decoder."""
    if jpeg_engine() != PILLOW_LIBJPEG:
        return None
    if jpeg_frame_marker(data) in _ARITHMETIC_SOF:
        return False
    return run(_pooled(height, width, 3), data) == JPEG_WHOLE


_ZLIB_PIECE = 1 << 20  # Python's zlib inflates into pieces of this size, copied into out


def _inflate(stream: bytes | memoryview, out: np.ndarray, inflater: str) -> bool:
    """Inflates the zlib stream into out (uint8).

    True only when the stream ends, its checksum holds, and it fills out exactly; the output never
    exceeds out (a bomb stops there)."""
    try:
        if inflater == ZLIB_NG:
            if _zlib_ng is None:
                return False
            got = _zlib_ng(stream, out=out)  # fails past out's end or on a bad checksum
            return np.asarray(got).nbytes == out.nbytes
        d = zlib.decompressobj()
        filled, tail = 0, stream
        while filled < out.nbytes:
            piece = d.decompress(tail, min(_ZLIB_PIECE, out.nbytes - filled))
            tail = d.unconsumed_tail
            if not piece:  # the data, or the stream, ended short of the image
                return False
            out[filled:filled + len(piece)] = np.frombuffer(piece, np.uint8)
            filled += len(piece)
        return not d.decompress(tail, 1) and d.eof  # no byte past the image; checksum read
    except Exception:  # zlib.error, imagecodecs' own error types  # noqa: BLE001
        return False


def decode_png(data: bytes, width: int, height: int, channels: int,
               inflater: str | None = None, start: int | None = None) -> np.ndarray | None:
    """The PNG's own samples, uint8 (height, width, channels).

    Rows are strided past each filter byte. None when the stream or a filter type is not what a
    whole image needs (Pillow decides). inflater: ZLIB_NG or ZLIB (default: png_decoder()); start:
    see idat_stream."""
    inflater = inflater or png_decoder()
    stream = idat_stream(data, start)
    if inflater is None or stream is None:
        return None
    row = width * channels
    raw = _native.pooled_empty(height * (row + 1))
    if not _inflate(stream, raw, inflater) or not _native.png_unfilter(raw, height, row, channels):
        return None
    # Explicit strides (numpy may give a length-1 axis any stride; the core wants them packed).
    return np.ndarray((height, width, channels), np.uint8, raw, offset=1,
                      strides=(row + 1, channels, 1))


# EXIF orientation (what Pillow's exif_transpose applies) as an array view.
def orient(arr: np.ndarray, orientation: int) -> np.ndarray:
    """arr (H, W, C) turned as ImageOps.exif_transpose turns an image with that orientation."""
    if orientation == 2:
        return arr[:, ::-1]
    if orientation == 3:
        return arr[::-1, ::-1]
    if orientation == 4:
        return arr[::-1]
    if orientation == 5:
        return arr.transpose(1, 0, 2)
    if orientation == 6:
        return arr.transpose(1, 0, 2)[:, ::-1]
    if orientation == 7:
        return arr[::-1, ::-1].transpose(1, 0, 2)
    if orientation == 8:
        return arr.transpose(1, 0, 2)[::-1]
    return arr


def fast_path(img: Image.Image, hf: bool, orientation: int
              ) -> Callable[[bytes], Pixels | None] | None:
    """The fast decode of what Pillow opened as img (header read), or None.

    orientation: the EXIF orientation Qwen's loading applies. Where it reproduces Pillow's result
    for such a header, a function bytes -> Pixels that returns None to decline."""
    w, h = img.width, img.height
    if orientation < 0:  # EXIF only Pillow can read (or refuse) as exif_transpose does
        return None
    fast = available()
    if orientation not in range(1, 9):
        orientation = 1  # exif_transpose ignores values outside 1-8
    if fast[LIBJPEG_TURBO] and img.format in ("JPEG", "MPO") and img.mode in ("RGB", "L"):

        def jpeg(data: bytes) -> Pixels | None:
            arr = decode_jpeg(data, w, h)
            if arr is None:
                return None
            if orientation != 1:
                arr = np.ascontiguousarray(orient(arr, orientation))
            return Pixels(arr, _F.RGB)

        return jpeg
    # Pillow's own reading of the header must be the fast path's: one zip tile of the whole
    # image, read as the mode's own samples (an 8-bit rawmode) from the first IDAT on.
    tile = getattr(img, "tile", None) or []
    plain = (len(tile) == 1 and tile[0][0] == "zip" and tuple(tile[0][1]) == (0, 0, w, h)
             and tile[0][3] == img.mode and not img.info.get("interlace"))
    if (png_decoder() and img.format == "PNG" and plain and img.mode in ("L", "RGB", "RGBA")
            and img.info.get("transparency") is None):
        start = tile[0][2]

        def png(data: bytes) -> Pixels | None:
            channels = png_channels(data, w, h)
            if channels is None or img.mode != {1: "L", 3: "RGB", 4: "RGBA"}[channels]:
                return None
            # Qwen applies an EXIF or XMP orientation, which the header shows unless a chunk
            # after the pixels carries it (declined below). (Alpha: load_image's convert("RGB")
            # drops it, as Kimi's does; the RGBX format reads past it.)
            chunks = png_chunks(data)
            # Pillow reads (and may refuse) chunks after the pixels only once it decoded them.
            if (chunks is None or chunks & ANIMATION or "after pixels" in chunks
                    or "repeated header" in chunks):
                return None
            arr = decode_png(data, w, h, channels, start=start)
            if arr is None:
                return None
            if orientation != 1:
                arr = np.ascontiguousarray(orient(arr, orientation))
            return Pixels(arr, {1: _F.GRAY, 3: _F.RGB, 4: _F.RGBX}[channels])

        return png
    return None


def read_file(path: str, width: int, height: int) -> bytes | None:
    """The file's bytes for a fast decoder, or None.

    None leaves it to Pillow, which reopens it, streams it, and reports any problem: a file far
    larger than any encoding of its pixels (trailing data) is not read into memory whole."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > 8 * width * height + (16 << 20):
                return None
            return fh.read(size + 1)
    except OSError:
        return None
