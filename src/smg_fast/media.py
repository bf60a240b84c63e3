"""Decoding and mode conversion with the references' semantics, validated before any big
allocation.

Qwen (transformers 5.x): PIL objects with an alpha band or a transparency key are composited onto
white, everything else goes through ``convert("RGB")``; encoded bytes and paths are opened the way
``transformers.image_utils.load_image`` does (EXIF orientation applied, then ``convert("RGB")``)
and then go through the same conversion as PIL objects (a colour key left by a palette
transparency index still turns white);
numpy HWC uint8 with 1 channel is repeated, with 4 channels blended onto white with NumPy's
float64 arithmetic, as ``convert_to_rgb`` does.

Kimi-K2.5 (upstream): every input is ``convert("RGB")`` (alpha dropped), no EXIF handling.
"""

from __future__ import annotations

import io
import os
import warnings
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from . import _native
from .errors import InvalidImageError

ImageInput = Any  # PIL.Image.Image | np.ndarray | bytes | str | os.PathLike

_DECODE_ERRORS = (OSError, ValueError, SyntaxError, UnidentifiedImageError, EOFError,
                  Image.DecompressionBombError, MemoryError)


def check_size(index: int, width: int, height: int, max_pixels: int | None) -> None:
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    if max_pixels is not None and width * height > max_pixels:
        raise InvalidImageError(
            index, f"{width}x{height} = {width * height} pixels exceeds the limit of {max_pixels}"
        )


def _open_encoded(index: int, source: Any, max_pixels: int | None) -> Image.Image:
    try:
        with warnings.catch_warnings():
            # Our own limit (checked below, before decoding) replaces Pillow's warning.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(source)
    except FileNotFoundError:
        raise InvalidImageError(index, f"no such file: {source!r}") from None
    except IsADirectoryError:
        raise InvalidImageError(index, f"is a directory: {source!r}") from None
    except _DECODE_ERRORS as exc:
        raise InvalidImageError(index, f"cannot decode image: {exc}") from None
    check_size(index, img.width, img.height, max_pixels)
    return img


def _decode(index: int, img: Image.Image, fn: Any) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return fn(img)
    except _DECODE_ERRORS as exc:
        raise InvalidImageError(index, f"cannot decode image: {exc}") from None


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


def _load_image_hf(img: Image.Image) -> Image.Image:
    # load_image, then the processor's own convert_to_rgb: a palette image with a transparency
    # index becomes RGB carrying a colour key, and the second step turns that colour white.
    img = ImageOps.exif_transpose(img)
    img = img if img.mode == "RGB" else img.convert("RGB")
    return _pil_to_rgb_hf(img)


def _rgbx_view(img: Image.Image) -> np.ndarray | None:
    """Pillow keeps RGB as 4 bytes per pixel; when the image is one memory block its Arrow export
    gives a zero-copy (H, W, 4) view, saving the full copy np.asarray makes."""
    if img.mode != "RGB" or not hasattr(img, "__arrow_c_array__"):
        return None
    try:
        img.load()
        schema, array = img.__arrow_c_array__()
        return _native.arrow_rgbx(schema, array, img.width, img.height)
    except (ValueError, TypeError, OSError, AttributeError):
        return None  # multi-block image or an older Pillow: take the copying path


def _as_array(index: int, img: Image.Image) -> np.ndarray:
    view = _rgbx_view(img)
    if view is not None:
        return view
    try:
        arr = np.asarray(img)
    except _DECODE_ERRORS as exc:
        raise InvalidImageError(index, f"cannot decode image: {exc}") from None
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise InvalidImageError(index, f"conversion to RGB gave {arr.dtype} {arr.shape}")
    return arr


def _from_numpy(index: int, arr: np.ndarray, hf: bool, max_pixels: int | None) -> np.ndarray:
    if arr.dtype != np.uint8:
        raise InvalidImageError(index, f"numpy images must be uint8 HWC, got dtype {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise InvalidImageError(
            index, f"numpy images must have shape (H, W) or (H, W, 1|3|4), got {arr.shape}"
        )
    check_size(index, arr.shape[1], arr.shape[0], max_pixels)
    channels = arr.shape[2]
    if channels == 1:
        return np.repeat(arr, 3, axis=2)
    if channels == 4:
        if not hf:
            return np.ascontiguousarray(arr[:, :, :3])
        alpha = arr[:, :, 3:4] / 255
        blended = alpha * arr[:, :, :3] + (1 - alpha) * 255
        return np.round(blended).astype(np.uint8)
    if arr.strides[2] != 1 or arr.strides[1] != 3 or arr.strides[0] < 3 * arr.shape[1]:
        return np.ascontiguousarray(arr)
    return arr


def load_rgb(index: int, item: ImageInput, *, hf: bool, max_pixels: int | None) -> np.ndarray:
    """The image as packed uint8 (H, W, 3), or an (H, W, 4) RGBX view of a Pillow RGB image's
    own memory (4th byte ignored); raises InvalidImageError naming index."""
    if isinstance(item, Image.Image):
        check_size(index, item.width, item.height, max_pixels)
        conv = _pil_to_rgb_hf if hf else _pil_to_rgb_plain
        return _as_array(index, _decode(index, item, conv))
    if isinstance(item, np.ndarray):
        return _from_numpy(index, item, hf, max_pixels)
    if isinstance(item, (bytes, bytearray, memoryview)):
        if len(item) == 0:
            raise InvalidImageError(index, "empty byte string")
        img = _open_encoded(index, io.BytesIO(bytes(item)), max_pixels)
    elif isinstance(item, (str, os.PathLike)):
        img = _open_encoded(index, os.fspath(item), max_pixels)
    else:
        raise InvalidImageError(index, f"unsupported input type {type(item).__name__}")
    with img:
        conv = _load_image_hf if hf else _pil_to_rgb_plain
        out = _decode(index, img, conv)
        arr = _as_array(index, out)
    # A transpose or convert may change the size only by swapping sides; re-check anyway.
    check_size(index, arr.shape[1], arr.shape[0], max_pixels)
    return arr
