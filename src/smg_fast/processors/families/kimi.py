"""Kimi-K2.5 (MoonViT): the upstream navit resize, zero padding and row-major patches.

The navit resize never upscales, truncates and caps each side; BICUBIC; zero padding right/bottom
to a multiple of patch*merge; patches [N, 3, P, P] in row-major order; grid in P-pixel patches.
Normalization follows the upstream NumPy code, which subtracts a float64 mean from float32 pixels
and multiplies by a float64 1 / std in place: each step computed in float64 and stored as
float32. Registers the family: its default backend is that upstream code ("upstream"), which
transformers does not ship; its torchvision backend is transformers' Kimi_K25ImageProcessor."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _native
from ...errors import UnsupportedCallError
from ..config import HALF, ProcessorConfig
from ..hooks import CallRules, DropIn, Reference
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register

# Upstream: x = f32(u / 255.0); x = f32(x - mean); y = f32(x * (1.0 / std)), each in float64
LUT_KIMI = _native.LutRecipe.KIMI_DIVIDE_MULTIPLY


def navit_size(width: int, height: int, patch: int, merge: int, in_patch_limit: int,
               per_side: int) -> tuple[int, int, int, int]:
    """(new_w, new_h, pad_w, pad_h) exactly as the upstream media code computes them."""
    s1 = math.sqrt(in_patch_limit / (max(1.0, width // patch) * max(1.0, height // patch)))
    s2 = per_side * patch / width
    s3 = per_side * patch / height
    scale = min(1.0, s1, s2, s3)
    new_w = min(max(1, int(width * scale)), per_side * patch)
    new_h = min(max(1, int(height * scale)), per_side * patch)
    factor = merge * patch
    return new_w, new_h, pad_to(new_w, factor), pad_to(new_h, factor)


def pad_to(side: int, factor: int) -> int:
    """The zero padding that brings side to a multiple of factor."""
    return (factor - side % factor) % factor


class KimiPatches(Processor):
    """What Kimi's upstream codes share: row-major [N, 3, P, P] patches of a zero-padded image.

    Images are opened as a plain convert("RGB") (alpha dropped, no EXIF transpose)."""

    load_like_transformers = False
    per_request_pixels = False

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major patches, no temporal copy

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows, 3, p, p)


class KimiK25Processor(KimiPatches):
    """Kimi-K2.5's navit resize, zero padding and row-major patches."""

    lut_recipe = LUT_KIMI

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        new_w, new_h, pad_w, pad_h = navit_size(width, height, cfg.patch_size, cfg.merge_size,
                                                cfg.in_patch_limit, cfg.patch_limit_on_one_side)
        return Plan(resize_w=new_w, resize_h=new_h, grid_h=(new_h + pad_h) // cfg.patch_size,
                    grid_w=(new_w + pad_w) // cfg.patch_size)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        out["grid_thws"] = out["image_grid_thw"]  # the upstream key
        return out


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of Kimi-K2.5's preprocessor_config.json (under media_proc_cfg)."""
    media = pre.get("media_proc_cfg", pre)
    out: dict[str, Any] = {}
    for key in ("in_patch_limit", "patch_limit_on_one_side", "patch_size", "image_mean",
                "image_std", "merge_kernel_size"):
        if media.get(key) is not None:
            out[key] = media[key]
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless both patch limits are set."""
    if not cfg.in_patch_limit or not cfg.patch_limit_on_one_side:
        raise ValueError("in_patch_limit and patch_limit_on_one_side must be positive")


def coerce_merge(fields: dict[str, Any]) -> dict[str, Any]:
    """media_proc_cfg's merge_kernel_size (a number or [n, n]) as merge_size."""
    if "merge_kernel_size" not in fields:
        return fields
    fields = dict(fields)
    mk = fields.pop("merge_kernel_size")
    fields["merge_size"] = int(mk[0] if isinstance(mk, (list, tuple)) else mk)
    return fields


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' size {"max_height", "max_width"} as patch_limit_on_one_side.

    Both are in patches per side, and equal, as transformers requires."""
    h, w = size.get("max_height"), size.get("max_width")
    if set(size) - {"max_height", "max_width"} or h is None or h != w:
        raise ValueError(f"size must be {{'max_height': n, 'max_width': n}} for kimi_k25, "
                         f"got {size}")
    return {"patch_limit_on_one_side": int(h)}


def check_call(cfg: ProcessorConfig, fields: dict[str, Any]) -> None:
    """The upstream code divides by 255.0 whatever a call asks."""
    if "rescale_factor" in fields and cfg.backend != "torchvision":
        raise UnsupportedCallError(f"rescale_factor / do_rescale are fixed (1/255) in "
                                   f"{cfg.family}'s upstream code")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Kimi_K25ImageProcessor constructor arguments for cfg."""
    side = cfg.patch_limit_on_one_side
    return dict(size={"max_height": side, "max_width": side}, max_patches=cfg.in_patch_limit,
                patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std))


def _folder_backend(named: str) -> tuple[str | None, str]:
    """The upstream backend for Kimi-K2.5's hub folders, unless one names transformers' class.

    Its hub folders run Kimi's own remote code."""
    if named == "Kimi_K25ImageProcessor":
        return "torchvision", f"preprocessor_config.json names {named} (torchvision)"
    return None, "a Kimi-K2.5 folder without transformers' class: its upstream code"


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Kimi attributes transformers' class holds."""
    side = cfg.patch_limit_on_one_side
    return dict(max_patches=cfg.in_patch_limit, size={"max_height": side, "max_width": side})


def _call_kwargs() -> type:
    """Kimi-K2.5's call options as a TypedDict of transformers' ImagesKwargs.

    transformers' own TypedDict lives in a module that imports torchvision."""
    from transformers.processing_utils import ImagesKwargs

    class KimiK25ImagesKwargs(ImagesKwargs, total=False):
        max_patches: int
        patch_size: int
        merge_size: int

    return KimiK25ImagesKwargs


def _read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """transformers' Kimi_K25ImageProcessor keyword arguments as media_proc_cfg keys."""
    out = dict(kwargs.get("media_proc_cfg") or {})
    if kwargs.get("max_patches") is not None:
        out["in_patch_limit"] = kwargs["max_patches"]
    size = kwargs.get("size")
    if size is not None and not isinstance(size, dict):
        raise ValueError(f"size must be a mapping, got {type(size).__name__}")
    if size and size.get("max_height") is not None:
        out["patch_limit_on_one_side"] = size["max_height"]
    for key in ("patch_size", "image_mean", "image_std"):
        if kwargs.get(key) is not None:
            out[key] = kwargs[key]
    if kwargs.get("merge_size") is not None:
        out["merge_kernel_size"] = kwargs["merge_size"]
    return out


_TV = "transformers.models.kimi_k25.image_processing_kimi_k25:Kimi_K25ImageProcessor"
_UPSTREAM = ("the upstream backend is Kimi-K2.5's own code, which transformers does not ship "
             "(tests/parity/test_kimi_parity.py proves it)")

# Kimi-K2.5 media_proc_cfg. Its drop-in is not registered with AutoImageProcessor: its hub
# folders run Kimi's remote code (the upstream numbers), which a class registered for its config
# would displace; smg_fast.hf.Kimi_K25ImageProcessor is used directly.
register(Family(
    "kimi_k25", KimiK25Processor,
    ProcessorConfig("kimi_k25", 14, 2, 1, HALF, HALF, in_patch_limit=16384,
                    patch_limit_on_one_side=512, backend="upstream"),
    frozenset({"in_patch_limit", "patch_limit_on_one_side", "merge_kernel_size"}), read_folder,
    CallRules({"max_patches": "in_patch_limit", "patch_size": "patch_size",
               "merge_size": "merge_size"}, _call_size, check_call),
    validate=validate, model_types=("kimi_k25",), recognizes=lambda pre: "media_proc_cfg" in pre,
    unambiguous=True, backends=("upstream", "torchvision"), coerce=coerce_merge,
    folder_backend=_folder_backend,
    reference=Reference({"torchvision": _TV}, _reference_kwargs, {"upstream": _UPSTREAM}),
    dropin=DropIn({"Kimi_K25ImageProcessor": "torchvision"}, _attributes, _call_kwargs,
                  lambda kwargs: "kimi_k25", _read_kwargs, auto_register=False,
                  note='``backend="upstream"`` gives Kimi-K2.5\'s own code\'s numbers instead.')))

__all__ = ["KimiK25Processor", "KimiPatches", "navit_size", "pad_to"]
