"""transformers-style image inputs, turned into what ``media.open_image`` reads.

The semantics are those of transformers' image processors (5.x) for the families here:

- nesting: a list of lists is flattened one level, a 4-d array (or a list of them) is a batch;
- torch tensors are read as their numpy arrays (CPU), CHW or HWC, inferred as transformers infers
  it (channels first wins when both ends could be channels) unless ``input_data_format`` says;
- float images (PIL backend): transformers turns them into uint8 for Pillow's resize, by
  ``astype(uint8)`` when every value is (close to) an integer in [0, 255], else by
  ``uint8(float32(x * 255))`` when all lie in [0, 1] (and divides by 255 after the resize);
- strings: a file path, a ``data:image/...;base64,`` URL or bare base64 (as ``load_image``);
  http(s) URLs are not fetched here.

Each prepared image carries how its values are scaled, so the caller picks the rescale factor
transformers' arithmetic amounts to."""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ..errors import InvalidImageError, UnsupportedCallError
from .call_options import CHANNELS_LAST, CallOptions

UINT8 = "uint8"  # values are pixel levels: the processor's rescale factor applies
UNIT = "unit"  # float in [0, 1]: already divided by 255 once (after the resize, by 1/255)


@dataclass(frozen=True)
class CallImage:
    item: Any  # PIL image, (H, W, C) uint8 array, bytes or path: what open_image reads
    scale: str = UINT8


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "numpy")


def _ndim(x: Any) -> int:
    return int(x.ndim) if isinstance(x, np.ndarray) or _is_tensor(x) else -1


def flatten(images: Any) -> list[Any]:
    """transformers' make_flat_list_of_images, for the input kinds smg-fast reads."""
    if isinstance(images, (list, tuple)):
        if images and all(isinstance(x, (list, tuple)) for x in images):
            return [img for sub in images for img in sub]
        items = list(images)
        if items and _ndim(items[0]) == 4:
            return [img for batch in items for img in batch]
        return items
    if _ndim(images) == 4:
        return list(images)
    return [images]


def _from_string(index: int, s: str) -> Any:
    if s.startswith(("http://", "https://")):
        raise InvalidImageError(index, "http(s) URLs are not fetched by smg-fast; pass the "
                                       "bytes (smg_fast.hf classes fetch them as transformers "
                                       "does)")
    if os.path.isfile(s):
        return s
    data = s.split(",", 1)[1] if s.startswith("data:image/") and "," in s else s
    try:  # strict, so a mistyped path is reported as a missing file, not as bad base64
        return base64.b64decode("".join(data.split()), validate=True) or s
    except (binascii.Error, ValueError):
        if s.startswith("data:"):
            raise InvalidImageError(index, "a data: URL must be data:image/...;base64,...") \
                from None
        return s  # open_image says no such file


def _infer_channels_last(index: int, shape: tuple[int, ...], fmt: str | None,
                         first_wins: bool) -> bool:
    if fmt is not None:
        return fmt == CHANNELS_LAST
    first, last = shape[0] in (1, 3, 4), shape[-1] in (1, 3, 4)
    if first and last:  # transformers' infer_channel_dimension_format picks channels first;
        return not first_wins  # smg-fast's own calls have always read such arrays as HWC
    if first or last:
        return last
    raise InvalidImageError(index, f"cannot tell the channel axis of an image of shape {shape}; "
                                   "pass input_data_format")


def _unit_to_uint8(index: int, hwc: np.ndarray) -> tuple[np.ndarray, str]:
    """transformers' float -> uint8 before Pillow's resize (see the module docstring)."""
    if not np.all(np.isfinite(hwc)):
        raise InvalidImageError(index, "float image has non-finite values")
    if np.allclose(hwc, hwc.astype(np.int64)):
        if hwc.min() < 0 or hwc.max() > 255:
            raise InvalidImageError(index, f"float image values [{hwc.min()}, {hwc.max()}] "
                                           "are outside [0, 255]")
        return hwc.astype(np.uint8), UINT8
    if hwc.min() < 0 or hwc.max() > 1:
        raise InvalidImageError(index, f"float image values [{hwc.min()}, {hwc.max()}] are "
                                       "outside [0, 1]")
    return (hwc.astype(np.float64) * 255).astype(np.float32).astype(np.uint8), UNIT


def _array(index: int, arr: np.ndarray, opts: CallOptions, torchvision: bool,
           first_wins: bool) -> CallImage:
    if arr.ndim == 3:
        if not _infer_channels_last(index, arr.shape, opts.input_data_format, first_wins):
            arr = np.moveaxis(arr, 0, -1)
    elif arr.ndim != 2:
        raise InvalidImageError(index, f"image arrays must have 2 or 3 dimensions, got shape "
                                       f"{arr.shape}")
    hwc = arr if arr.ndim == 3 else arr[:, :, None]
    channels = hwc.shape[2]
    if channels not in (1, 3, 4):
        raise InvalidImageError(index, f"images must have 1, 3 or 4 channels, got {channels}")
    if not opts.do_convert_rgb and channels != 3:
        raise UnsupportedCallError(f"do_convert_rgb=False with a {channels}-channel image: "
                                   "transformers would keep its channels; smg-fast always "
                                   "produces 3")
    scale = UINT8
    if hwc.dtype == np.uint8:
        pass
    elif np.issubdtype(hwc.dtype, np.integer) and not torchvision:
        if hwc.size and (hwc.min() < 0 or hwc.max() > 255):
            raise InvalidImageError(index, f"integer image values [{hwc.min()}, {hwc.max()}] "
                                           "are outside [0, 255]")
        hwc = hwc.astype(np.uint8)
    elif np.issubdtype(hwc.dtype, np.floating) and not torchvision:
        if channels == 4:
            raise UnsupportedCallError("4-channel float images are not supported (transformers "
                                       "blends them in float before its uint8 conversion); pass "
                                       "uint8")
        hwc, scale = _unit_to_uint8(index, hwc)
    else:
        why = (" with backend='torchvision' (transformers resizes them in floating point, "
               "which smg-fast does not compute); pass uint8" if torchvision else "")
        raise UnsupportedCallError(f"{hwc.dtype} images are not supported{why}")
    if scale == UNIT and opts.do_rescale:
        raise UnsupportedCallError("do_rescale=True with float images in [0, 1]: transformers "
                                   "divides them by 255 twice (once after its resize, once to "
                                   "rescale), which smg-fast does not reproduce; pass "
                                   "do_rescale=False or uint8 images")
    return CallImage(np.ascontiguousarray(hwc), scale)


def prepare_inputs(images: Any, opts: CallOptions, torchvision: bool,
                   channels_first_wins: bool = False) -> list[CallImage]:
    """The flattened images, each ready for open_image.

    channels_first_wins: an array whose first and last axes could both be channels is CHW
    (transformers' guess), else HWC."""
    out: list[CallImage] = []
    for i, item in enumerate(flatten(images)):
        if _is_tensor(item):
            try:
                item = item.detach().cpu().numpy()
            except (TypeError, RuntimeError) as exc:  # bfloat16 has no numpy dtype
                raise InvalidImageError(i, f"cannot read the tensor as numpy: {exc}") from None
        if isinstance(item, str):
            item = _from_string(i, item)
        if isinstance(item, np.ndarray):
            out.append(_array(i, item, opts, torchvision, channels_first_wins))
            continue
        if not opts.do_convert_rgb:
            if not isinstance(item, Image.Image):
                raise UnsupportedCallError("do_convert_rgb=False applies to PIL images and "
                                           "arrays only (transformers loads files and URLs with "
                                           "convert('RGB'))")
            if item.mode != "RGB":
                raise UnsupportedCallError(f"do_convert_rgb=False with a {item.mode} image: "
                                           "transformers would keep its bands; smg-fast always "
                                           "produces RGB")
            item = np.asarray(item)  # no colour-key compositing, as np.array(image) there
        out.append(CallImage(item))
    return out


__all__ = ["UINT8", "UNIT", "CallImage", "flatten", "prepare_inputs"]
