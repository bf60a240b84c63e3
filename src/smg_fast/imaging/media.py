"""Decoding and mode conversion with the references' semantics, validated before any big allocation.

Qwen (transformers 5.x): PIL objects with an alpha band or a transparency key are composited onto
white, everything else goes through ``convert("RGB")``; encoded bytes and paths are opened the way
``transformers.image_utils.load_image`` does (EXIF orientation applied, then ``convert("RGB")``)
and then go through the same conversion as PIL objects (a colour key left by a palette
transparency index still turns white);
numpy HWC uint8 with 1 channel is repeated, with 4 channels blended onto white with NumPy's
float64 arithmetic, as ``convert_to_rgb`` does (``torchvision=True``: in float32, as transformers'
torchvision backend does; PIL images, bytes and paths convert as above).

Kimi-K2.5 (upstream): every input is ``convert("RGB")`` (alpha dropped), no EXIF handling.

Decoding returns ``Pixels``: the decoded image's own memory and the ``_native.PixelFormat`` that
reproduces the conversion above. Modes L, LA, RGBA (without a transparency key) and 1- / 4-channel
arrays are converted by the native core while it reads them (no full-size converted copy);
Pillow's convert remains for every other mode and for colour keys.

Two steps: ``open_image`` reads only the header (size, format, EXIF orientation) so a caller can
size the output and refuse it before a pixel is decoded; ``ImageHeader.decode`` then decodes.
Encoded inputs are opened only by the Pillow plugins of an allowlist of formats, so no plugin that
runs an external program (EPS: Ghostscript) ever sees a request's bytes.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from ..errors import InvalidImageError
from . import decoders
from .decode_memory import decode_bytes, decode_copies, decoder_bytes_per_pixel, encoded_size
from .lazy_jpeg import LazyJpegImageFile, encoded_source
from .pixels import (
    DECODE_ERRORS,
    OBJECT_REPR,
    Pixels,
    from_numpy,
    pixels_hf,
    pixels_load_image_hf,
    pixels_plain,
)

ImageInput = Any  # PIL.Image.Image | np.ndarray | bytes | str | os.PathLike

# What a VLM service needs; none of these plugins runs an external program.
DEFAULT_IMAGE_FORMATS: tuple[str, ...] = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "MPO")

_ORIENTATION = 0x0112
_SWAPPING = (5, 6, 7, 8)  # EXIF orientations whose transpose swaps width and height
UNKNOWN_ORIENTATION = -1
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(?:="|>)([0-9])')


def pillow_formats() -> frozenset[str]:
    """Every format the installed Pillow can open.

    MPO: JPEG files that Pillow's JPEG plugin opens as multi-picture; allowing it needs JPEG too."""
    Image.init()
    return frozenset(Image.OPEN) | {"MPO"}


# Pillow formats whose decoder runs an external program on the data (EPS: Ghostscript): never
# accepted, whatever the configuration says.
RUNS_PROGRAMS = frozenset({"EPS"})


def normalize_formats(formats: Sequence[str] | str) -> tuple[str, ...]:
    """Upper-cased, de-duplicated format names (a string may be comma-separated).

    ValueError names any the installed Pillow cannot open, and any whose decoder runs a program."""
    if isinstance(formats, str):
        formats = formats.split(",")
    out: list[str] = []
    for f in formats:
        name = str(f).strip().upper()
        if name and name not in out:
            out.append(name)
    if not out:
        raise ValueError("image_formats must name at least one format")
    dangerous = [f for f in out if f in RUNS_PROGRAMS]
    if dangerous:
        raise ValueError(f"image format(s) {dangerous} are refused: Pillow decodes them by "
                         "running an external program on the data")
    unknown = [f for f in out if f not in pillow_formats()]
    if unknown:
        raise ValueError(f"image format(s) {unknown} are not known to Pillow; known: "
                         f"{sorted(pillow_formats())}")
    return tuple(out)


# The setting that limits pixels, named in every refusal (the processor's option; the server flag).
LIMIT_NAME = "max_image_pixels (the server's --max-image-pixels)"
# Pillow's own refusal at open, at twice its limit: "Image size (N pixels) exceeds limit of ...".
_PILLOW_BOMB = re.compile(r"\((\d+) pixels\)")


def check_size(index: int, width: int, height: int, max_pixels: int | None) -> None:
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    if max_pixels is not None and width * height > max_pixels:
        raise InvalidImageError(
            index, f"{width}x{height} = {width * height} pixels exceeds the limit of {max_pixels} "
                   f"pixels set by {LIMIT_NAME}"
        )


def _bomb(index: int, exc: Exception, max_pixels: int | None) -> InvalidImageError:
    """Pillow refused an image's declared size at open (over twice PIL.Image.MAX_IMAGE_PIXELS).

    Said as our own limit says it: the same setting, whatever the size."""
    found = _PILLOW_BOMB.search(str(exc))
    pixels = int(found[1]) if found else None
    size = f"{pixels} pixels" if pixels is not None else "its declared size"
    if max_pixels is not None and (pixels is None or pixels > max_pixels):
        return InvalidImageError(index, f"{size} exceeds the limit of {max_pixels} pixels set by "
                                        f"{LIMIT_NAME}")
    return InvalidImageError(index, f"{size} exceeds Pillow's own refusal at twice "
                                    f"PIL.Image.MAX_IMAGE_PIXELS ({Image.MAX_IMAGE_PIXELS}), "
                                    f"which applies under {LIMIT_NAME}: raise both")


def _sniff_format(prefix: bytes) -> str | None:
    """The format whose signature check accepts prefix.

    Only the plugins' prefix tests run (never an _open), so naming a refused format opens nothing.
    """
    Image.init()
    for fmt in Image.ID:
        accept = Image.OPEN[fmt][1]
        try:
            if accept is not None and accept(prefix):
                return fmt
        except Exception:  # a plugin's signature test on odd bytes  # noqa: BLE001
            continue
    return None


def _source_name(source: Any) -> str:
    """How an error names the input: its path, or "the N bytes" (never an object repr)."""
    if isinstance(source, io.BytesIO):
        return f"the {len(source.getbuffer())} bytes"
    return repr(os.fspath(source))


def _problem(exc: BaseException, source: Any) -> str:
    """The decoder's complaint in words a caller can act on."""
    if isinstance(exc, UnidentifiedImageError):
        return f"cannot decode {_source_name(source)}: not an image in an accepted format"
    text = OBJECT_REPR.sub(_source_name(source), str(exc)) or type(exc).__name__
    return f"cannot decode {_source_name(source)}: {text}"


def _refused(index: int, prefix: bytes, formats: tuple[str, ...], exc: Exception,
             source: Any) -> None:
    fmt = _sniff_format(prefix)
    if fmt is not None and fmt not in formats:
        raise InvalidImageError(index, f"image format {fmt} is not accepted (allowed: "
                                       f"{', '.join(formats)})") from None
    raise InvalidImageError(index, _problem(exc, source)) from None


def _open_encoded(index: int, source: Any, max_pixels: int | None,
                  formats: tuple[str, ...]) -> Image.Image:
    Image.init()  # registers every plugin once, so the filter below sees WEBP, TIFF...
    try:
        with warnings.catch_warnings():
            # Our own limit (checked below, before decoding) replaces Pillow's warning.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(source, formats=[f for f in formats if f in Image.OPEN])
    except FileNotFoundError:
        raise InvalidImageError(index, f"no such file: {source!r}") from None
    except IsADirectoryError:
        raise InvalidImageError(index, f"is a directory: {source!r}") from None
    except Image.DecompressionBombError as exc:
        raise _bomb(index, exc, max_pixels) from None
    except DECODE_ERRORS as exc:
        prefix = b""
        try:
            if isinstance(source, io.BytesIO):
                prefix = source.getvalue()[:64]
            else:
                with open(source, "rb") as fh:
                    prefix = fh.read(64)
        except OSError:
            pass
        _refused(index, prefix, formats, exc, source)
        raise AssertionError("unreachable") from None
    try:
        if img.format not in formats:  # a plugin may open a related format (JPEG -> MPO)
            raise InvalidImageError(index, f"image format {img.format} is not accepted "
                                           f"(allowed: {', '.join(formats)})")
        check_size(index, img.width, img.height, max_pixels)
    except BaseException:
        img.close()
        raise
    return img


def _header_orientation(img: Image.Image) -> int:
    """The EXIF orientation exif_transpose will apply, read from the header only.

    UNKNOWN_ORIENTATION when the header holds EXIF this cannot read as Pillow would (an unreadable
    block, a PNG's "Raw profile type exif" text): the fast decoders leave such images to Pillow.
    Reads its own Exif object: calling img.getexif() before load would cache a possibly incomplete
    copy (a PNG's eXIf chunk may follow the pixels), and for PNG it would decode the image."""
    if "Raw profile type exif" in img.info:
        return UNKNOWN_ORIENTATION
    value: Any = None
    tags = getattr(img, "tag_v2", None)  # TIFF: the first IFD is the header
    if tags is not None:
        value = tags.get(_ORIENTATION)
    raw = img.info.get("exif")
    if value is None and isinstance(raw, (bytes, bytearray)):
        try:
            exif = Image.Exif()
            exif.load(bytes(raw))
            value = exif.get(_ORIENTATION)
        except Exception:  # unreadable EXIF: Pillow's exif_transpose decides  # noqa: BLE001
            return UNKNOWN_ORIENTATION
    if value is None:
        xmp = img.info.get("XML:com.adobe.xmp") or img.info.get("xmp")
        if isinstance(xmp, str):
            xmp = xmp.encode("utf-8", "replace")
        if isinstance(xmp, (bytes, bytearray)):
            m = _XMP_ORIENTATION.search(xmp)
            value = int(m.group(1)) if m else None
    if value is None:
        return 1
    # exif_transpose looks the value up in a dict of ints: an ASCII "6" does not turn the image,
    # a RATIONAL 6/1 (equal to 6) does. Only a plain int is certain here.
    return value if type(value) is int else UNKNOWN_ORIENTATION


def has_transparency(img: Image.Image) -> bool:
    """Whether a PIL image has an alpha band or a transparency key (read from its header)."""
    return "A" in img.getbands() or img.info.get("transparency") is not None


def _check_numpy(index: int, arr: np.ndarray, max_pixels: int | None) -> np.ndarray:
    if arr.dtype != np.uint8:
        raise InvalidImageError(index, f"numpy images must be uint8 HWC, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise InvalidImageError(
            index, f"numpy images must have shape (H, W) or (H, W, 1|3|4), got {arr.shape}"
        )
    check_size(index, arr.shape[1], arr.shape[0], max_pixels)
    return arr


class ImageHeader:
    """One input whose size is known and whose pixels are not decoded yet.

    ``width`` x ``height`` is the size ``decode()`` returns (for encoded Qwen inputs, after the
    EXIF orientation read from the header). ``decode()`` may be called once; ``close()`` releases
    an open file without decoding.
    """

    def __init__(self, index: int, width: int, height: int,
                 decode: Callable[[], Pixels], close: Callable[[], None] | None = None
                 ) -> None:
        self.index = index
        self.width = width
        self.height = height
        self._decode = decode
        self._close = close
        # Which decoder made the pixels of an encoded input (decoders.PILLOW, LIBJPEG_TURBO,
        # or for PNG the inflater: ZLIB_NG or ZLIB), once decode() ran; None for arrays and
        # PIL images.
        self.decoder: str | None = None
        # For a JPEG the native decoder may take as it is (no orientation to apply): given
        # decoders.RunJpeg, decodes while the native core already computes (see
        # decoders.decode_jpeg_running) and consumes the header; or returns False, the header
        # untouched for decode() (which goes straight to Pillow when the native decoder
        # declined or failed). Callable once.
        self.decode_running: Callable[[decoders.RunJpeg], bool] | None = None
        # The input carries an alpha band or a transparency key (its RGB depends on how that is
        # blended), as open_image saw it before decoding.
        self.transparent = False
        # Memory its decode may hold at its peak, planned from the header (decode_bytes()).
        self.decode_bytes = decode_bytes(width, height, 1)

    def decode(self) -> Pixels:
        """The decoded image and the PixelFormat it is read in.

        The native core converts it to RGB as it reads. Raises InvalidImageError naming the
        index."""
        fn, self._decode = self._decode, None
        if fn is None:
            raise RuntimeError(f"image {self.index} was already decoded or closed")
        try:
            px = fn()
        finally:
            self.close()
        # The header's size is what the output was sized (and admitted) by: a decoder that
        # returns another size is refused rather than trusted. (An orientation the header did
        # not show may swap the sides; the output's size does not depend on it.)
        if sorted((px.height, px.width)) != sorted((self.height, self.width)):
            raise InvalidImageError(self.index, f"decoded size {px.width}x{px.height} "
                                                f"differs from the header's "
                                                f"{self.width}x{self.height}")
        return px

    def close(self) -> None:
        fn, self._close = self._close, None
        self._decode = self.decode_running = None
        if fn is not None:
            fn()


def _pil_header(index: int, item: Image.Image, hf: bool, max_pixels: int | None,
                formats: tuple[str, ...]) -> ImageHeader:
    # An opened but not yet loaded image decodes on first use, with its own plugin: refuse the
    # formats outside the allowlist before that happens. A lazy JPEG stands for the image its
    # engine's loader would have decoded (lazy_jpeg.py): accepted as that decoded image would be.
    if (getattr(item, "tile", None) and item.format and item.format not in formats
            and not isinstance(item, LazyJpegImageFile)):
        raise InvalidImageError(index, f"image format {item.format} is not accepted (allowed: "
                                       f"{', '.join(formats)})")
    check_size(index, item.width, item.height, max_pixels)
    conv = pixels_hf if hf else pixels_plain
    header = ImageHeader(index, item.width, item.height, lambda: conv(index, item))
    header.transparent = has_transparency(item)
    # Not yet loaded (Image.open'ed): Pillow decodes it, with its own copies.
    loaded = not getattr(item, "tile", None)
    header.decode_bytes = decode_bytes(item.width, item.height,
                                       decode_copies(item, hf, False, native=loaded),
                                       per_pixel=0 if loaded else decoder_bytes_per_pixel(item))
    return header


def _encoded_header(index: int, img: Image.Image, hf: bool, reopen: Callable[[], Image.Image]
                    | None, data: bytes | None = None, path: str | None = None) -> ImageHeader:
    """img.

    Opened (header read) from data or path. reopen: for files, opens it again at decode time (the
    header pass closes it so a long list of paths does not hold a descriptor each)."""
    w, h = img.width, img.height
    transparent = has_transparency(img)
    orientation = _header_orientation(img) if hf else 1
    if orientation in _SWAPPING:
        w, h = h, w
    conv = pixels_load_image_hf if hf else pixels_plain
    fast = decoders.fast_path(img, hf, orientation)
    held: list[Image.Image | None] = [img]
    if reopen is not None:
        img.close()
        held[0] = None

    def decode() -> Pixels:
        if fast is not None:
            raw = (data if data is not None else
                   decoders.read_file(path, img.width, img.height) if path else None)
            px = fast(raw) if raw is not None else None
            if px is not None:
                header.decoder = (decoders.LIBJPEG_TURBO if img.format != "PNG"
                                  else decoders.png_decoder())
                return px
        header.decoder = decoders.PILLOW
        src = held[0] if held[0] is not None else reopen()  # type: ignore[misc]
        held[0] = src
        return conv(index, src)

    def close() -> None:
        if held[0] is not None:
            held[0].close()
            held[0] = None

    header = ImageHeader(index, w, h, decode, close)
    header.transparent = transparent
    turns = orientation == UNKNOWN_ORIENTATION or orientation in range(2, 9)
    # Planned for the decoder the header chooses: a native one reads the pixels into their one
    # buffer, Pillow makes its own copies first.
    header.decode_bytes = decode_bytes(w, h, decode_copies(img, hf, turns, native=fast is not None),
                                       encoded_size(data, path), decoder_bytes_per_pixel(img))
    if (fast is not None and img.format in ("JPEG", "MPO")
            and (orientation == 1 or orientation not in range(1, 9))):

        def decode_running(run: decoders.RunJpeg) -> bool:
            nonlocal fast
            header.decode_running = None  # once
            if decoders.jpeg_engine() != decoders.PILLOW_LIBJPEG:
                return False  # (before reading a file: decode() would read it again)
            raw = (data if data is not None else
                   decoders.read_file(path, img.width, img.height) if path else None)
            done = (decoders.decode_jpeg_running(raw, img.width, img.height, run)
                    if raw is not None else None)
            if done is False:
                fast = None  # it would decline again: Pillow decides, in decode()
            if not done:
                return False
            header.decoder = decoders.LIBJPEG_TURBO
            header.close()  # consumed, as by decode()
            return True

        header.decode_running = decode_running
    return header


def open_image(index: int, item: ImageInput, *, hf: bool, max_pixels: int | None,
               formats: Sequence[str] = DEFAULT_IMAGE_FORMATS,
               torchvision: bool = False) -> ImageHeader:
    """Reads item's header only (Image.open is lazy) and checks its size.

    Raises InvalidImageError naming index. torchvision (with hf): 4-channel arrays are blended as
    transformers' torchvision backend does."""
    formats = tuple(formats)
    if isinstance(item, Image.Image):
        # An undecoded JPEG whose decode changes nothing but time (lazy_jpeg.py): its bytes.
        source = encoded_source(item) if "JPEG" in formats else None
        if source is None:
            return _pil_header(index, item, hf, max_pixels, formats)
        item = source
    if isinstance(item, np.ndarray):
        arr = _check_numpy(index, item, max_pixels)
        header = ImageHeader(index, arr.shape[1], arr.shape[0],
                             lambda: from_numpy(arr, hf, torchvision))
        header.transparent = arr.shape[2] == 4
        header.decode_bytes = 0 if arr.flags.c_contiguous else arr.nbytes  # the caller's memory
        return header
    if isinstance(item, (bytes, bytearray, memoryview)):
        if len(item) == 0:
            raise InvalidImageError(index, "empty byte string")
        data = bytes(item)
        img = _open_encoded(index, io.BytesIO(data), max_pixels, formats)
        return _encoded_header(index, img, hf, None, data=data)
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        img = _open_encoded(index, path, max_pixels, formats)
        return _encoded_header(index, img, hf,
                               lambda: _open_encoded(index, path, max_pixels, formats), path=path)
    raise InvalidImageError(index, f"unsupported input type {type(item).__name__}")


def load_rgb(index: int, item: ImageInput, *, hf: bool, max_pixels: int | None,
             formats: Sequence[str] = DEFAULT_IMAGE_FORMATS) -> np.ndarray:
    """The image as uint8 pixels the native core reads.

    Either (H, W, 3) with packed pixels (rows possibly strided), or an (H, W, 4) RGBX view of a
    Pillow RGB image's own memory (4th byte ignored); raises InvalidImageError naming index."""
    return open_image(index, item, hf=hf, max_pixels=max_pixels, formats=formats).decode().to_rgb()
