"""Pixtral's mistral_common numerics: the backend "upstream" of the pixtral family.

vLLM serves mistralai/* checkpoints in Mistral's own format (params.json with a vision_encoder
section, tekken.json) through mistral_common's ImageEncoder, not transformers' class. Per image:
anything but RGB is converted to RGBA and pasted onto white through its alpha (Pillow's paste);
an image whose larger side passes max_image_size is scaled by that ratio with each side
*rounded* (Python's round, at least 1); each side is then rounded up to a multiple of
image_patch_size * spatial_merge_size (the unit one image token covers). The uint8 pixels, as
float32, are resized with OpenCV's INTER_CUBIC (reproduced natively: resize_opencv_cubic), then
divided by 255, less CLIP's mean, over CLIP's std, each step in float32. The images of a call are
padded and stacked as the pixtral family's other backends do: pixel_values [N, 3, H, W] (zeros
beyond each image), image_sizes [h, w] per image. OpenCV builds with Intel IPP (opencv-python's
wheels) resize most such images in IPP instead, whose float results differ and depend on the
CPU: this backend equals mistral_common run with IPP off (docs/exactness.md#pixtral)."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import numpy as np

from ... import _native
from ...errors import CompactFormatError, InvalidImageError, UnsupportedCallError
from ...imaging.pixels import _rgbx_view
from ..processor import ProcessorOutput

UPSTREAM = "upstream"
TEKKEN_FILE = "tekken.json"
PARAMS_FILE = "params.json"
CALL_ONLY = ("Pixtral's upstream backend (mistral_common's numerics) is computed by the library "
             "call (processor(images)) only, not by the native pipeline the service runs")


def mistral_size(height: int, width: int, max_image_size: int, unit: int) -> tuple[int, int]:
    """(height, width) mistral_common resizes to: rounded under max_image_size, up to unit."""
    ratio = max(height / max_image_size, width / max_image_size)
    if ratio > 1:
        height = max(round(height / ratio), 1)
        width = max(round(width / ratio), 1)
    return ((height - 1) // unit + 1) * unit, ((width - 1) // unit + 1) * unit


def rgb_on_white(image: Any, index: int = 0) -> np.ndarray:
    """A PIL image or a uint8 (H, W, 3) RGB array as mistral_common's RGB pixels.

    RGB is kept; any other PIL mode is converted to RGBA and pasted onto white through its
    alpha, then made RGB. A PIL image's pixels may come as a view of Pillow's own RGBX memory
    (H, W, 4), whose first three channels are the RGB."""
    from PIL import Image

    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise UnsupportedCallError(f"image {index}: the upstream Pixtral backend reads uint8 "
                                       f"(H, W, 3) RGB arrays or PIL images, got {image.dtype} "
                                       f"{image.shape}")
        pixels = np.ascontiguousarray(image)
    elif isinstance(image, Image.Image):
        if image.mode != "RGB":
            rgba = image.convert("RGBA")
            white = Image.new("RGBA", rgba.size, "WHITE")
            white.paste(rgba, (0, 0), rgba)
            image = white.convert("RGB")
        view = _rgbx_view(index, image)
        pixels = view if view is not None else np.asarray(image)
    else:
        raise UnsupportedCallError(f"image {index}: the upstream Pixtral backend reads PIL images "
                                   f"and uint8 RGB arrays, got {type(image).__name__}")
    if pixels.shape[0] < 1 or pixels.shape[1] < 1:
        raise InvalidImageError(index, f"a {pixels.shape[1]}x{pixels.shape[0]} image is empty")
    return pixels


def encode(pixels: np.ndarray, max_image_size: int, unit: int, mean: Any, std: Any) -> np.ndarray:
    """One RGB (or RGBX) uint8 image as mistral_common's (3, h, w) float32 encoder input."""
    h, w = mistral_size(pixels.shape[0], pixels.shape[1], max_image_size, unit)
    return _native.resize_opencv_cubic(pixels, w, h, [float(np.float32(m)) for m in mean],
                                       [float(np.float32(s)) for s in std], channels=3)


def call(proc: Any, images: Any, return_tensors: str | None, dtype: Any,
         options: dict[str, Any]) -> ProcessorOutput:
    """PixtralProcessor.__call__ for the upstream backend: float32 only, no call options."""
    if options.get("encoding"):
        raise CompactFormatError("the upstream Pixtral backend's output is not a table of uint8 "
                                 "codes: OpenCV's cubic resize computes floats")
    if options:
        raise UnsupportedCallError(f"the upstream Pixtral backend (mistral_common's numerics) "
                                   f"takes no call options, got {sorted(options)}")
    if str(dtype).rpartition(".")[2].strip("'>") != "float32":  # "float32", np / torch float32
        raise UnsupportedCallError("the upstream Pixtral backend computes float32, as "
                                   "mistral_common does")
    if return_tensors not in (None, "np", "pt"):
        raise UnsupportedCallError(f"return_tensors must be 'np', 'pt' or None, got "
                                   f"{return_tensors!r}")
    items = list(images) if isinstance(images, (list, tuple)) else [images]
    if not items:
        raise ValueError("no images given")
    cfg = proc.config
    pixels = [rgb_on_white(im, i) for i, im in enumerate(items)]  # every input checked first
    encoded = [encode(p, int(cfg.longest_edge), cfg.patch_size, cfg.image_mean, cfg.image_std)
               for p in pixels]
    h = max(e.shape[1] for e in encoded)
    w = max(e.shape[2] for e in encoded)
    if len(encoded) == 1:
        out = encoded[0][None]  # nothing to pad
    else:
        out = np.zeros((len(encoded), 3, h, w), dtype=np.float32)
        for i, e in enumerate(encoded):
            out[i, :, :e.shape[1], :e.shape[2]] = e
    sizes = np.array([e.shape[1:] for e in encoded], dtype=np.int64)
    unit = cfg.patch_size
    tokens = (sizes[:, 0] // unit) * (sizes[:, 1] // unit + 1)
    if return_tensors == "pt":
        import torch

        return ProcessorOutput(pixel_values=torch.from_numpy(out),
                               image_sizes=torch.from_numpy(sizes),
                               num_tokens=torch.from_numpy(tokens))
    return ProcessorOutput(pixel_values=out, image_sizes=sizes, num_tokens=tokens)


def is_mistral_folder(folder: str, backend: str | None = None) -> bool:
    """Whether folder is read in Mistral's format: a params.json with a vision_encoder section.

    A folder that also holds transformers' config.json (mistralai/* repositories often ship both)
    is read in Mistral's format when it has consolidated*.safetensors weights (vLLM's "auto"
    config format then picks Mistral's) or for backend "upstream"; otherwise as transformers
    reads it."""
    params = os.path.join(folder, PARAMS_FILE)
    if not os.path.isfile(params):
        return False
    if backend != UPSTREAM and os.path.isfile(os.path.join(folder, "config.json")) and \
            not glob.glob(os.path.join(glob.escape(folder), "consolidated*.safetensors")):
        return False
    return isinstance(_read(params).get("vision_encoder"), dict)


def folder_fields(folder: str) -> dict[str, Any]:
    """The pixtral config fields of a Mistral-format folder, for the upstream backend.

    mistral_common reads tekken.json's "image" section (image_patch_size, max_image_size,
    spatial_merge_size); without one, params.json's vision_encoder gives the same values
    (patch_size, max_image_size or image_size, spatial_merge_size). patch_size is the unit of
    one image token: the patch times the spatial merge."""
    tekken = os.path.join(folder, TEKKEN_FILE)
    image = _read(tekken).get("image") if os.path.isfile(tekken) else None
    if isinstance(image, dict):
        patch, most = image.get("image_patch_size"), image.get("max_image_size")
        merge = image.get("spatial_merge_size", 1)
        where = tekken
    else:
        enc = _read(os.path.join(folder, PARAMS_FILE))["vision_encoder"]
        patch, merge = enc.get("patch_size"), enc.get("spatial_merge_size", 1)
        most = enc.get("max_image_size", enc.get("image_size"))
        where = os.path.join(folder, PARAMS_FILE)
    for name, value in (("patch size", patch), ("max image size", most), ("merge", merge)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: the {name} must be a positive integer, got {value!r}")
    return {"patch_size": patch * merge, "longest_edge": most, "backend": UPSTREAM}


def _read(path: str) -> dict[str, Any]:
    """A JSON object file (ValueError for anything else)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


__all__ = ["CALL_ONLY", "UPSTREAM", "call", "encode", "folder_fields", "is_mistral_folder",
           "mistral_size", "rgb_on_white"]
