"""Kimi-VL (MoonViT, moonshotai/Kimi-VL-A3B-*): its remote-code KimiVLImageProcessor's numbers.

The upstream steps: with the patch grid counted on floor-divided sides, an image over
``in_token_limit`` patches is scaled by sqrt(limit / patches), each side truncated, by Pillow's
BICUBIC in the image's own mode; then zero padding right and bottom to a multiple of merge x patch
(``pad_input``, which the hub configs set); 512 or more patches on a side is refused (MoonViT's
position embedding); torchvision's to_tensor (f32(u) / 255) of ``convert("RGB")`` and normalize
((x - mean) / std in float32); patches [N, 3, P, P] in row-major order; ``image_grid_hws`` (n, 2).

Resizing in the image's own mode equals converting first only for RGB and grey; padding in it
gives black after ``convert("RGB")`` only for the modes in _BLACK_PADDING (a palette pads with its
entry 0, CMYK with white). Other inputs are refused with a typed error, not computed otherwise.
Registers the family: its one backend is that upstream code ("upstream"), which transformers does
not ship."""

from __future__ import annotations

import io
import math
import os
from typing import Any

import numpy as np
from PIL import Image

from ...errors import InvalidImageError
from ..batch import PlannedBatch
from ..config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules, Reference
from ..plan import Plan, check_aspect
from ..processor import LUT_HF, ProcessorOutput
from ..registry import Family, register
from .kimi import KimiPatches, check_call, coerce_merge, pad_to

POS_EMB_SIDE = 512  # patches a side MoonViT's position embedding refuses (and more)
_SAME_RESIZED = frozenset({"RGB", "L"})  # resize then convert("RGB") == convert, then resize
_BLACK_PADDING = frozenset({"RGB", "L", "RGBA", "LA", "RGBX", "1", "I", "I;16", "I;16L",
                            "I;16B", "I;16N", "F"})
_ARRAY_MODES = {2: "LA", 4: "RGBA"}  # an array as Image.fromarray reads it (others: RGB / L)


def token_budget_size(width: int, height: int, patch: int, merge: int,
                      limit: int) -> tuple[int, int, int, int]:
    """(new_w, new_h, pad_w, pad_h) as KimiVLImageProcessor computes them (pad_input)."""
    patches = (width // patch) * (height // patch)
    if patches > limit:
        scale = math.sqrt(limit / patches)
        width, height = int(width * scale), int(height * scale)
    factor = merge * patch
    return width, height, pad_to(width, factor), pad_to(height, factor)


def _source(item: Any) -> tuple[str, int, int] | None:
    """(mode, width, height) of item as the upstream code would see it; None where unknown here.

    A file or bytes that do not open are left to open_image, which refuses them by type."""
    if isinstance(item, Image.Image):
        return item.mode, item.width, item.height
    if isinstance(item, np.ndarray):
        if item.ndim < 2:
            return None
        mode = _ARRAY_MODES.get(item.shape[2] if item.ndim == 3 else 1, "RGB")
        return mode, int(item.shape[1]), int(item.shape[0])
    if isinstance(item, (bytes, bytearray, memoryview)):
        source: Any = io.BytesIO(bytes(item))
    elif isinstance(item, (str, os.PathLike)):
        source = os.fspath(item)
    else:
        return None
    try:
        with Image.open(source) as img:  # the header only
            return img.mode, img.width, img.height
    except Exception:  # noqa: BLE001 (open_image reports it, with its own typed error)
        return None


class KimiVLProcessor(KimiPatches):
    """KimiVLImageProcessor's token-budget resize, zero padding and row-major patches."""

    # to_tensor's f32(u) / 255, then (x - f32(mean)) / f32(std) in float32: for every uint8 value
    # the same float32 as f32(f64(u) * (1 / 255)), so the table transformers' PIL classes use
    lut_recipe = LUT_HF

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        new_w, new_h, pad_w, pad_h = token_budget_size(width, height, cfg.patch_size,
                                                       cfg.merge_size, cfg.in_patch_limit)
        if new_w < 1 or new_h < 1:
            raise InvalidImageError(index, f"{width}x{height} scales to {new_w}x{new_h} under "
                                           f"{cfg.in_patch_limit} patches")
        grid_h, grid_w = (new_h + pad_h) // cfg.patch_size, (new_w + pad_w) // cfg.patch_size
        if max(grid_h, grid_w) >= POS_EMB_SIDE:
            raise InvalidImageError(index, f"{width}x{height} becomes {grid_h}x{grid_w} patches: "
                                           f"Kimi-VL's position embedding takes fewer than "
                                           f"{POS_EMB_SIDE} a side")
        return Plan(resize_w=new_w, resize_h=new_h, grid_h=grid_h, grid_w=grid_w)

    def plan_batch(self, images: Any, dtype: Any = "float32") -> PlannedBatch:
        """The base class's, after refusing the inputs whose own mode changes the result."""
        items = list(images) if isinstance(images, (list, tuple)) else [images]
        for index, item in enumerate(items):
            self._check_mode(index, item)
        return super().plan_batch(items, dtype)

    def _check_mode(self, index: int, item: Any) -> None:
        """InvalidImageError where the upstream's steps in item's own mode differ from RGB's."""
        seen = _source(item)
        if seen is None or seen[1] < 1 or seen[2] < 1:
            return  # open_image or plan refuses it
        mode, width, height = seen
        if mode in _SAME_RESIZED:
            return
        cfg = self.config
        new_w, new_h, pad_w, pad_h = token_budget_size(width, height, cfg.patch_size,
                                                       cfg.merge_size, cfg.in_patch_limit)
        resized = (new_w, new_h) != (width, height)
        if not resized and (mode in _BLACK_PADDING or pad_w == pad_h == 0):
            return
        step = "resizes" if resized else "pads"
        raise InvalidImageError(index, f"Kimi-VL's processor {step} a {mode} image in its own "
                                       f"mode, which differs from RGB's; convert it to RGB first")

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        out["image_grid_hws"] = out["image_grid_thw"][:, 1:]  # the upstream key: (h, w) rows
        return out


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of Kimi-VL's preprocessor_config.json; ValueError for its center-crop mode."""
    if not pre.get("pad_input", False):
        raise ValueError("pad_input false (KimiVLImageProcessor's center crop) is not "
                         "implemented; Kimi-VL's hub configs set pad_input true")
    out: dict[str, Any] = {}
    for key, field in (("in_token_limit", "in_patch_limit"), ("patch_size", "patch_size"),
                       ("image_mean", "image_mean"), ("image_std", "image_std"),
                       ("merge_kernel_size", "merge_kernel_size")):
        if pre.get(key) is not None:
            out[field] = pre[key]
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the patch budget is set."""
    if not cfg.in_patch_limit or cfg.in_patch_limit < 1:
        raise ValueError("in_token_limit must be positive")


def _recognizes(pre: dict[str, Any]) -> bool:
    """A preprocessor_config.json that names KimiVLImageProcessor (its own key or auto_map)."""
    auto = pre.get("auto_map") or {}
    named = {str(pre.get("image_processor_type", "")),
             str(auto.get("AutoImageProcessor", "")).rpartition(".")[2]}
    return "KimiVLImageProcessor" in named


_UPSTREAM = ("the upstream backend is Kimi-VL's remote code (KimiVLImageProcessor), which "
             "transformers does not ship (tests/parity/test_kimi_vl_parity.py proves it)")

# moonshotai/Kimi-VL-A3B-Instruct's preprocessor_config.json; a folder's missing keys take
# KimiVLImageProcessor's defaults (CLIP mean / std, no padding, which is refused).
register(Family(
    "kimi_vl", KimiVLProcessor,
    ProcessorConfig("kimi_vl", 14, 2, 1, HALF, HALF, in_patch_limit=4096, backend="upstream"),
    frozenset({"in_patch_limit", "merge_kernel_size"}), read_folder,
    CallRules({}, check=check_call),
    folder_defaults=dict(image_mean=list(OPENAI_CLIP_MEAN), image_std=list(OPENAI_CLIP_STD),
                         in_patch_limit=4096, patch_size=14, merge_kernel_size=[2, 2]),
    validate=validate, model_types=("kimi_vl",), recognizes=_recognizes, unambiguous=True,
    backends=("upstream",), coerce=coerce_merge,
    folder_backend=lambda named: (None, "Kimi-VL folders run its remote code: the upstream"),
    reference=Reference({}, lambda cfg: {}, {"upstream": _UPSTREAM})))

__all__ = ["POS_EMB_SIDE", "KimiVLProcessor", "token_budget_size"]
