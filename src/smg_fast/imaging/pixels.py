"""Decoded pixels and their conversion to RGB with the references' semantics.

A decoded image stays in its own memory as ``Pixels``: the array and the ``_native.PixelFormat``
whose conversion reproduces the reference (transformers' convert_to_rgb for Qwen, Pillow's
``convert("RGB")`` for Kimi); the native core converts rows while it reads them, so no full-size
converted copy exists. Pillow's own conversions remain for the modes and cases no format covers
(P, CMYK, I;16, ..., and transparency colour keys).
"""

from __future__ import annotations

import re
import subprocess
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .. import _native
from ..errors import InvalidImageError

# (SubprocessError: a plugin's helper program failing, for formats an operator allowed)
# Not MemoryError: running out of memory is not a bad image (the server answers it with
# RESOURCE_EXHAUSTED, so that callers retry instead of dropping the image).
# TypeError, AssertionError: what Pillow's plugins raise on some malformed files (a PNG whose
# second IHDR makes it a palette image with no palette, a tRNS chunk of the wrong kind).
DECODE_ERRORS = (OSError, ValueError, SyntaxError, UnidentifiedImageError, EOFError,
                 TypeError, AssertionError, Image.DecompressionBombError,
                 subprocess.SubprocessError)

OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def decode_error(index: int, exc: BaseException) -> InvalidImageError:
    text = OBJECT_REPR.sub("the image data", str(exc)) or type(exc).__name__
    return InvalidImageError(index, f"cannot decode the image: {text}")


def pillow_step(index: int, img: Image.Image, fn: Any) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return fn(img)
    except DECODE_ERRORS as exc:
        raise decode_error(index, exc) from None


_F = _native.PixelFormat
# Pillow modes the native core reads as they are, mapped to the format that reproduces
# transformers' convert_to_rgb (alpha composited onto white, with Pillow's arithmetic) when the
# image carries no transparency key...
_HF_FORMATS = {"RGB": _F.RGB, "L": _F.GRAY, "LA": _F.GRAY_ALPHA_OVER_WHITE_PILLOW,
               "RGBA": _F.RGBA_OVER_WHITE_PILLOW}
# ... and Pillow's convert("RGB") (alpha dropped; a transparency key changes no pixel).
_PLAIN_FORMATS = {"RGB": _F.RGB, "L": _F.GRAY, "LA": _F.GRAY_ALPHA_DROP, "RGBA": _F.RGBX}
_CHANNELS = {_F.RGB: 3, _F.RGBX: 4, _F.GRAY: 1, _F.GRAY_ALPHA_DROP: 2,
             _F.GRAY_ALPHA_OVER_WHITE_PILLOW: 2, _F.RGBA_OVER_WHITE_PILLOW: 4,
             _F.RGBA_OVER_WHITE_NUMPY: 4, _F.RGBA_OVER_WHITE_TORCH: 4}


@dataclass(frozen=True)
class Pixels:
    """A decoded image.

    Uint8 (H, W, C) memory (packed pixels; rows may lie further apart than their width, e.g. past a
    PNG row's filter byte) and the PixelFormat the native core reads it in, converting to RGB while
    it reads."""

    array: np.ndarray
    fmt: _native.PixelFormat

    @property
    def width(self) -> int:
        return int(self.array.shape[1])

    @property
    def height(self) -> int:
        return int(self.array.shape[0])

    def to_rgb(self) -> np.ndarray:
        """Packed (H, W, 3) RGB, or the (H, W, 4) RGBX array itself (4th byte ignored).

        Other formats are converted into a new array."""
        if self.fmt in (_F.RGB, _F.RGBX):
            return self.array
        return _native.to_rgb(self.array, self.fmt)


def _composite_on_white(img: Image.Image) -> Image.Image:
    rgba = img.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def _pil_to_rgb_hf(img: Image.Image) -> Image.Image:
    if "A" in img.getbands() or img.info.get("transparency") is not None:
        return _composite_on_white(img)
    return img if img.mode == "RGB" else img.convert("RGB")


def _pil_to_rgb_plain(img: Image.Image) -> Image.Image:
    return img if img.mode == "RGB" else img.convert("RGB")


def pixels_hf(index: int, img: Image.Image) -> Pixels:
    """transformers' convert_to_rgb: native for the modes it covers, Pillow for the rest."""
    fmt = _HF_FORMATS.get(img.mode) if img.info.get("transparency") is None else None
    if fmt is None:
        img, fmt = pillow_step(index, img, _pil_to_rgb_hf), _F.RGB
    return _as_pixels(index, img, fmt)


def pixels_plain(index: int, img: Image.Image) -> Pixels:
    """Pillow's convert("RGB"): native for the modes it covers, Pillow for the rest."""
    fmt = _PLAIN_FORMATS.get(img.mode)
    if fmt is None:
        img, fmt = pillow_step(index, img, _pil_to_rgb_plain), _F.RGB
    return _as_pixels(index, img, fmt)


def pixels_load_image_hf(index: int, img: Image.Image) -> Pixels:
    """load_image, then the processor's own convert_to_rgb.

    A palette image with a transparency index becomes RGB carrying a colour key, and the second step
    turns that colour white. img is ours (opened from the request's bytes or path), so it is
    transposed in place: no copy."""
    pillow_step(index, img, lambda im: ImageOps.exif_transpose(im, in_place=True))
    if img.info.get("transparency") is None and img.mode in _PLAIN_FORMATS:
        # load_image's convert("RGB") drops the alpha and leaves no key for convert_to_rgb.
        return _as_pixels(index, img, _PLAIN_FORMATS[img.mode])
    if img.mode != "RGB":
        img = pillow_step(index, img, lambda im: im.convert("RGB"))
    return pixels_hf(index, img)


def _rgbx_view(index: int, img: Image.Image) -> np.ndarray | None:
    """Pillow keeps RGB and RGBA as 4 bytes per pixel.

    When the image is one memory block its Arrow export gives a zero-copy (H, W, 4) view, saving the
    full copy np.asarray makes."""
    if img.mode not in ("RGB", "RGBA") or not hasattr(img, "__arrow_c_array__"):
        return None
    try:
        img.load()
    except DECODE_ERRORS as exc:
        raise decode_error(index, exc) from None
    try:
        schema, array = img.__arrow_c_array__()
        return _native.arrow_rgbx(schema, array, img.width, img.height)
    except (ValueError, TypeError, OSError, AttributeError):
        return _pasted_rgbx(img)  # several blocks: one row copy into pooled memory


def _pasted_rgbx(img: Image.Image) -> np.ndarray | None:
    """An RGB or RGBA image's 4-byte pixels copied row by row into one pooled (H, W, 4) array.

    Pillow keeps an image over its block size (16 MiB) in several blocks, which no single view
    covers. Its own paste copies the rows (all 4 bytes of each pixel, unconverted) into an image
    mapped over a pooled buffer, whose pages the pool keeps touched: a fraction of the packing
    copy np.asarray makes into fresh memory. None where Pillow refuses (the copying path)."""
    w, h = img.size
    buf = _native.pooled_empty(w * h * 4, huge_pages=False)
    try:
        dest = Image.frombuffer("RGBA", (w, h), buf, "raw", "RGBA", 0, 1)
        dest.im.paste(img.im, (0, 0, w, h))
    except (ValueError, TypeError, AttributeError):
        return None
    return buf.reshape(h, w, 4)


def _as_pixels(index: int, img: Image.Image, fmt: _native.PixelFormat) -> Pixels:
    """img's pixels, to be read in fmt.

    A view of Pillow's own memory where its Arrow export allows (RGB as RGBX), else the one copy
    np.asarray makes."""
    view = _rgbx_view(index, img)
    if view is not None:
        return Pixels(view, _F.RGBX if fmt == _F.RGB else fmt)
    try:
        arr = np.asarray(img)
    except DECODE_ERRORS as exc:
        raise decode_error(index, exc) from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != _CHANNELS[fmt]:
        raise InvalidImageError(index, f"decoding {img.mode} gave {arr.dtype} {arr.shape}")
    return Pixels(arr, fmt)


def from_numpy(arr: np.ndarray, hf: bool, torchvision: bool = False) -> Pixels:
    """The caller's array itself as Pixels, copied only when its pixels are not packed.

    Read in the format of convert_to_rgb (hf; torchvision: the torchvision backend's float32 blend)
    or of dropping the alpha. The native core reads packed rows."""
    channels = arr.shape[2]
    if channels == 1:
        fmt = _F.GRAY
    elif channels == 4:
        fmt = (_F.RGBA_OVER_WHITE_TORCH if torchvision else _F.RGBA_OVER_WHITE_NUMPY) if hf \
            else _F.RGBX
    else:
        fmt = _F.RGB
    # (a single channel's own stride is meaningless: arr[:, :, None] makes it 0)
    packed = ((channels == 1 or arr.strides[2] == 1) and arr.strides[1] == channels
              and arr.strides[0] >= channels * arr.shape[1])
    return Pixels(arr if packed else np.ascontiguousarray(arr), fmt)
