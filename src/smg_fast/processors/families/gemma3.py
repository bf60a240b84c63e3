"""Gemma 3: a fixed-size BILINEAR resize to whole channel-first images.

Each image is resized to size x size (896 published; no aspect preservation, no pixel budget)
with BILINEAR (Pillow's for the PIL backend, torch's uint8 antialiased one for torchvision),
rescaled by 1/255 and normalized with mean = std = 0.5: pixel_values [N, 3, size, size], and
num_crops (0 per image). The native layout is one patch as large as the image (merge 1,
temporal 1), which is the channel-first image itself. Each image becomes 256 tokens in the
prompt (Gemma 3's image_seq_length). A call with ``do_pan_and_scan=True`` also cuts each image
of exaggerated aspect into crops (processors/pan_and_scan.py): each image's output is then the
whole image followed by its crops, each resized alike, and num_crops counts them. Registers the
family: transformers' Gemma3ImageProcessorPil / Gemma3ImageProcessor are its reference."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import UnsupportedCallError
from ...imaging.media import ImageInput, Pixels
from ..batch import ADDRESSABLE, PreparedBatch
from ..call_inputs import UINT8
from ..config import HALF, ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference
from ..option_types import exact_flag, exact_float, exact_int
from ..pan_and_scan import PanAndScan, crop_boxes
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register

TOKENS_PER_IMAGE = 256  # image_seq_length: 64x64 SigLIP patches, pooled 4x4
_PAN_AND_SCAN = ("pan_and_scan_min_crop_size", "pan_and_scan_max_num_crops",
                 "pan_and_scan_min_ratio_to_activate")


class Gemma3Processor(Processor):
    """Gemma 3's fixed square resize; each image one channel-first (3, size, size) output."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        side = self.config.patch_size  # the image side: one patch per image
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        return Plan(resize_w=side, resize_h=side, grid_h=1, grid_w=1)

    def _layout(self) -> tuple[int, int]:
        return 1, 1

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        side = self.config.patch_size
        return (rows, 3, side, side)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        return np.full(len(grid), TOKENS_PER_IMAGE, dtype=np.int64)

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """Processor.__call__, and Gemma 3's pan-and-scan options (see the module docstring)."""
        pas = _pan_and_scan(options)
        if pas is None:
            return super().__call__(images, return_tensors, dtype,
                                    channels_first_wins=channels_first_wins, **options)
        table_dtype, dtype = self._compact_dtype(options, dtype)
        return_tensors, opts, items = self._read_call(images, return_tensors,
                                                      channels_first_wins, options)
        if any(it.scale != UINT8 for it in items):
            raise UnsupportedCallError("pan-and-scan of float images is not computed by smg-fast")
        proc = self._variant(opts, UINT8)
        whole = proc.prepare([it.item for it in items], dtype)
        pixels: list[Pixels] = []
        crops: list[int] = []
        for i, px in enumerate(whole.pixels):
            boxes = crop_boxes(px.width, px.height, pas, i)
            pixels += [px] + [Pixels(px.array[y:y + h, x:x + w], px.fmt) for x, y, w, h in boxes]
            crops.append(len(boxes))
        plans = [proc.plan(px.width, px.height, i) for i, px in enumerate(pixels)]
        batch = PreparedBatch(proc, pixels, plans, whole.dtype)
        batch.check_nbytes(ADDRESSABLE)  # the crops are views: nothing is allocated before this
        pixel_values = batch.compute()
        if table_dtype:
            pixel_values = proc._compact([proc], pixel_values, table_dtype, return_tensors)
        return proc._wrap(pixel_values, batch.grid, batch.num_tokens, return_tensors,
                          batch.dtype, crops)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str,
              crops: list[int] | None = None) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        num_crops = np.asarray(crops if crops is not None else [0] * len(grid), dtype=np.int64)
        if return_tensors == "pt":
            import torch

            out["num_crops"] = torch.from_numpy(num_crops)
        else:
            out["num_crops"] = num_crops
        del out["image_grid_thw"]  # not Gemma's: every image is one (3, size, size) tensor
        return out


def _pan_and_scan(options: dict[str, Any]) -> PanAndScan | None:
    """A call's pan-and-scan settings (removed from options); None when it is off.

    UnsupportedCallError when it is on without all three settings (transformers' classes then
    fail on None)."""
    on = options.pop("do_pan_and_scan", None)
    values = [options.pop(k, None) for k in _PAN_AND_SCAN]
    if on is not None:
        exact_flag("do_pan_and_scan", on)
    checks = (exact_int, exact_int, exact_float)
    for name, value, check in zip(_PAN_AND_SCAN, values, checks, strict=True):
        if value is not None:
            check(name, value)
    if not on:
        return None
    if any(v is None for v in values):
        raise UnsupportedCallError(f"do_pan_and_scan=True needs {', '.join(_PAN_AND_SCAN)}")
    return PanAndScan(int(values[0]), int(values[1]), float(values[2]))


def _square(size: dict[str, Any]) -> int:
    """The side of a {"height": n, "width": n} size; UnsupportedCallError for other sizes."""
    h, w = size.get("height"), size.get("width")
    if set(size) - {"height", "width"} or h is None or h != w:
        raise UnsupportedCallError(f"smg-fast computes Gemma 3's square sizes "
                                   f"{{'height': n, 'width': n}} only, got {size}")
    return int(h)


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Gemma 3 preprocessor_config.json (size, mean/std, rescale, resample)."""
    out: dict[str, Any] = {}
    size = pre.get("size")
    if isinstance(size, dict):
        out["patch_size"] = _square({k: v for k, v in size.items() if v is not None})
    elif isinstance(size, int) and not isinstance(size, bool):
        out["patch_size"] = size  # transformers reads an int size as a square
    elif size is not None:
        raise ValueError(f"size must be {{'height': n, 'width': n}} or an int, got {size!r}")
    for key in ("image_mean", "image_std", "rescale_factor", "resample"):
        if pre.get(key) is not None:
            out[key] = pre[key]
    if pre.get("do_pan_and_scan"):
        raise ValueError("do_pan_and_scan=True is not supported (transformers computes it)")
    return {**out, **flag_fields(pre)}


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the layout is one whole image (merge 1, temporal 1)."""
    if cfg.merge_size != 1 or cfg.temporal_patch_size != 1:
        raise ValueError("gemma3 takes merge_size 1 and temporal_patch_size 1")


def _calls(opts: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3's pan-and-scan options, which Gemma3Processor.__call__ reads itself."""
    return {k: v for k, v in opts.items() if k not in ("do_pan_and_scan", *_PAN_AND_SCAN)}


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' size option {"height": n, "width": n} as the image side."""
    return {"patch_size": _square(size)}


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Gemma 3 constructor arguments for cfg."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Gemma 3 attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"height": side, "width": side}, do_pan_and_scan=None,
                **{k: None for k in _PAN_AND_SCAN})


def _call_kwargs() -> type:
    """Gemma 3's call options as a TypedDict of transformers' ImagesKwargs.

    transformers' own TypedDict lives in its PIL module, which needs no torchvision."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorKwargs

    return Gemma3ImageProcessorKwargs


def _read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """transformers' constructor arguments as preprocessor_config.json keys.

    The same keys, less the pan-and-scan settings: the drop-in keeps those as attributes and
    applies them to each call (DropIn.call_attributes)."""
    return {k: v for k, v in kwargs.items() if k not in ("do_pan_and_scan", *_PAN_AND_SCAN)}


_HF = "transformers.models.gemma3.image_processing"
# Published google/gemma-3-4b-it (and 12b / 27b) preprocessor_config.json: size 896x896,
# resample 2 (BILINEAR), rescale 1/255, mean = std = 0.5, do_pan_and_scan off.
register(Family(
    "gemma3", Gemma3Processor,
    ProcessorConfig("gemma3", 896, 1, 1, HALF, HALF, resample=2),
    frozenset({"rescale_factor"}), read_folder,
    CallRules({}, _call_size, options=_calls),
    # transformers' class defaults, for what a folder lacks: size 224, BILINEAR, ImageNet-standard
    # mean / std (0.5), rescale 1/255
    folder_defaults={"patch_size": 224, "resample": 2, "image_mean": HALF, "image_std": HALF,
                     "rescale_factor": 1 / 255},
    validate=validate, model_types=("gemma3",),
    recognizes=lambda pre: str(pre.get("image_processor_type", "")).startswith(
        "Gemma3ImageProcessor"),
    reference=Reference({"pil": f"{_HF}_pil_gemma3:Gemma3ImageProcessorPil",
                         "torchvision": f"{_HF}_gemma3:Gemma3ImageProcessor"},
                        _reference_kwargs),
    dropin=DropIn({"Gemma3ImageProcessor": "torchvision", "Gemma3ImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "gemma3", _read_kwargs,
                  outputs=("pixel_values", "num_crops"), in_engines=True, pil_keeps_uint8=True,
                  lists_when_untyped=True,
                  call_attributes=("do_pan_and_scan", *_PAN_AND_SCAN),
                  note="Pan-and-scan settings given to the constructor (as vLLM gives a "
                       "request's) apply to each call that does not set them.")))

__all__ = ["TOKENS_PER_IMAGE", "Gemma3Processor"]
