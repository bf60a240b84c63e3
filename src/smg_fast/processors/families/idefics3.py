"""Idefics3 and SmolVLM: LANCZOS to a longest edge, then to tile multiples, tiles + a global image.

transformers' Idefics3ImageProcessorPil / Idefics3ImageProcessor (SmolVLM's classes are the same
code): each image is resized (LANCZOS: Pillow's, or torch's uint8 antialiased lanczos) so that
its longer side is ``longest_edge`` (the other side truncated, then made even; at most 4096 per
side), then resized again, from that uint8 image, so that both sides are multiples of the tile
(``patch_size``: max_image_size's longest_edge). An image larger than one tile is cut into its
tiles row by row, and that second image resized once more to one tile follows as the global
image; otherwise the second image is the one frame. With ``crop_to_patches`` off
(do_image_splitting=False) the first image is resized to one tile instead. Rescale and
normalize as transformers' classes do. pixel_values is [samples, frames, 3, tile, tile]: a flat
list of images is one sample, a nested list one sample per inner list, whose frames are padded
with zero frames to the longest; pixel_attention_mask [samples, frames, tile, tile] int64 is 1 on
real frames, 0 on padding. ``return_row_col_info=True`` adds rows / cols (nested lists, 0 for an
image that is one frame), what the prompt's tokens are built from. Registers the families."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import _native
from ...errors import CompactFormatError, InvalidImageError, UnsupportedCallError
from ...imaging.media import ImageInput
from ...resample import native_filter, native_pass_order
from ..config import HALF, ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..option_types import exact_size
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from .idefics3_sizes import count_patches, longest_edge_size, tile_multiple_size

LANCZOS = 1
# <image> tokens per frame (the Idefics3Processor's image_seq_len) of the published checkpoints,
# by tile side: Idefics3-8B (364), SmolVLM-Instruct / SmolVLM2-2.2B (384), SmolVLM2-256M / 500M
# (512)
SEQ_LEN = {364: 169, 384: 81, 512: 64}
_OWN_OPTIONS = ("do_pad", "max_image_size", "return_row_col_info")
_RGB = _native.PixelFormat.RGB
_RGBX = _native.PixelFormat.RGBX


class Idefics3Processor(Processor):
    """Idefics3's chained LANCZOS resizes; each image's tiles, then its global image."""

    presizes = True  # the plan reads the second resize's image (presize), not the decoded one

    def sizes(self, width: int, height: int, index: int = 0) -> tuple[tuple[int, int], ...]:
        """(width, height) of each uint8 resize before the plan's: the first, then the second."""
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        tile = cfg.patch_size
        h1, w1 = longest_edge_size(height, width, int(cfg.longest_edge or 0))
        if not cfg.crop_to_patches:
            return (w1, h1), (tile, tile)
        h2, w2 = tile_multiple_size(h1, w1, tile)
        if h2 < 1 or w2 < 1:  # transformers' resize fails on the zero side too
            raise InvalidImageError(index, f"a {width}x{height} image resizes to a zero side")
        return (w1, h1), (w2, h2)

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        (_, _), (w2, h2) = self.sizes(width, height, index)
        tile = self.config.patch_size
        if h2 > tile or w2 > tile:
            return Plan(w2, h2, h2 // tile, w2 // tile, extra=(Plan(tile, tile, 1, 1),))
        return Plan(tile, tile, 1, 1)

    def presize(self, src: np.ndarray, fmt: Any) -> tuple[np.ndarray, Any]:
        """The second resize's image, from the decoded one through the first resize.

        Each resize reads its source in its format, converted to RGB while read (before the
        resampler, as the reference converts before it resizes), and writes RGB: Pillow's RGBX
        memory loses its pad byte in the first resize's horizontal pass instead of being
        resized as a fourth channel."""
        cfg = self.config
        flt = native_filter(cfg.resample)
        order = native_pass_order(cfg.pass_order)
        for w, h in self.sizes(src.shape[1], src.shape[0]):
            if (w, h) != (src.shape[1], src.shape[0]):
                src = _native.resize_rgb(src, w, h, flt, order, self._resampler, fmt)
                fmt = _RGB if src.shape[2] == 3 else _RGBX
        if fmt not in (_RGB, _RGBX):  # no resize: converted as the reference does
            src, fmt = _native.to_rgb(src, fmt), _RGB
        return src, fmt

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major tiles, each a channel-first (3, tile, tile) image

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        side = self.config.patch_size
        return (1, rows, 3, side, side)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        return frames(grid) * SEQ_LEN[self.config.patch_size]

    def __call__(self, images: ImageInput | list[Any] | tuple[Any, ...] | None = None,
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """Processor.__call__ with Idefics3's batch: one sample per inner list of a nested list.

        Reads do_pad (True, transformers' default, is what it computes), max_image_size
        ({"longest_edge": n}, the tile) and return_row_col_info."""
        if options.get("videos") is not None:
            raise UnsupportedCallError(f"{self.config.family} takes no videos here")
        if options.pop("do_pad", None) is False:
            raise UnsupportedCallError("do_pad=False (lists of unpadded frames) is not computed "
                                       "by smg-fast")
        row_col = bool(options.pop("return_row_col_info", False))
        if options.get("patch_size") is not None:  # not an option of transformers' classes
            raise UnsupportedCallError("Idefics3's tile is max_image_size={'longest_edge': n}")
        if options.get("max_image_size") is not None:
            options["patch_size"] = _tile(options.pop("max_image_size"))
        options.pop("max_image_size", None)
        counts = _sample_counts(images)
        if counts is not None:
            images = [im for sample in images for im in sample]
            if options.get("encoding") and len(counts) > 1:
                raise CompactFormatError("a nested batch pads samples with zero frames, which no "
                                         "table carries: request a float dtype without encoding, "
                                         "or one sample per call")
        out = super().__call__(images, return_tensors, dtype,
                               channels_first_wins=channels_first_wins, **options)
        return self._batch(out, counts, row_col, return_tensors)

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        """Runs of images (float images next to uint8 ones) as one sample's frames."""
        return np.concatenate(parts, axis=1)

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        out["_grid"] = grid
        del out["image_grid_thw"]  # not Idefics3's: rows / cols say how the frames divide
        return out

    def _batch(self, out: ProcessorOutput, counts: list[int] | None, row_col: bool,
               return_tensors: Any) -> ProcessorOutput:
        """out as [samples, frames, ...] with pixel_attention_mask, and rows / cols if asked."""
        grid = out.pop("_grid")
        n = frames(grid)
        counts = counts if counts is not None else [len(grid)]
        per_sample = [int(n[i:j].sum()) for i, j in _spans(counts)]
        most = max(per_sample)
        side = int(out["pixel_values"].shape[-1])  # a call's tile (max_image_size) may differ
        mask = np.zeros((len(counts), most, side, side), np.int64)
        for s, f in enumerate(per_sample):
            mask[s, :f] = 1
        pv = out["pixel_values"]
        if len(counts) > 1 or per_sample[0] != most:
            pv = _padded(pv, per_sample, most)
        out["pixel_values"] = pv
        if return_tensors == "pt":
            import torch

            out["pixel_attention_mask"] = torch.from_numpy(mask)
        else:
            out["pixel_attention_mask"] = mask
        if row_col:
            split = (grid[:, 1] * grid[:, 2]) > 1
            rows = np.where(split, grid[:, 1], 0).tolist()
            cols = np.where(split, grid[:, 2], 0).tolist()
            out["rows"] = [rows[i:j] for i, j in _spans(counts)]
            out["cols"] = [cols[i:j] for i, j in _spans(counts)]
        return out


def frames(grid: np.ndarray) -> np.ndarray:
    """Frames per image for (n, 3) grid rows [1, rows, columns]: the tiles, and a global image."""
    cells = grid[:, 1] * grid[:, 2]
    return (cells + (cells > 1)).astype(np.int64)


def _spans(counts: list[int]) -> list[tuple[int, int]]:
    """(start, stop) of each sample's images in the flat list."""
    out, start = [], 0
    for c in counts:
        out.append((start, start + c))
        start += c
    return out


def _padded(pv: Any, per_sample: list[int], most: int) -> Any:
    """The one-sample frames [1, F, 3, t, t] as [samples, most, 3, t, t], zero frames after."""
    flat = pv[0]
    if hasattr(flat, "new_zeros"):  # a torch tensor
        out = flat.new_zeros((len(per_sample), most, *flat.shape[1:]))
    else:
        out = np.zeros((len(per_sample), most, *flat.shape[1:]), flat.dtype)
    start = 0
    for s, f in enumerate(per_sample):
        out[s, :f] = flat[start:start + f]
        start += f
    return out


def _sample_counts(images: Any) -> list[int] | None:
    """Images per sample of a nested list (transformers' batch of samples), None if flat."""
    if isinstance(images, (list, tuple)) and images and \
            all(isinstance(s, (list, tuple)) for s in images):
        if any(isinstance(im, (list, tuple)) for s in images for im in s):
            raise ValueError("images nest at most two lists deep (samples, then their images)")
        if not all(images):
            raise UnsupportedCallError("a sample without images is not computed by smg-fast")
        return [len(s) for s in images]
    return None


def _tile(size: Any) -> int:
    """max_image_size {"longest_edge": n} as n."""
    d = exact_size("max_image_size", size)
    if set(d) != {"longest_edge"}:
        raise UnsupportedCallError(f"max_image_size must be {{'longest_edge': n}}, got {size}")
    return int(d["longest_edge"])


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' size option {"longest_edge": n} as longest_edge."""
    if set(size) != {"longest_edge"}:
        raise UnsupportedCallError(f"smg-fast computes Idefics3's size {{'longest_edge': n}} "
                                   f"only, got {size}")
    return {"longest_edge": int(size["longest_edge"])}


def _options(opts: dict[str, Any]) -> dict[str, Any]:
    """Idefics3's own options, which Idefics3Processor.__call__ reads itself, checked."""
    if opts.get("do_pad") is False:
        raise UnsupportedCallError("do_pad=False (lists of unpadded frames) is not computed by "
                                   "smg-fast")
    if opts.get("max_image_size") is not None:
        _tile(opts["max_image_size"])
    return {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of an Idefics3 / SmolVLM preprocessor_config.json."""
    out: dict[str, Any] = {}
    for key, field in (("size", "longest_edge"), ("max_image_size", "patch_size")):
        value = pre.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or set(k for k, v in value.items() if v is not None) != \
                {"longest_edge"}:
            raise ValueError(f"{key} must be {{'longest_edge': n}}, got {value!r}")
        out[field] = int(value["longest_edge"])
    if pre.get("do_image_splitting") is not None:
        out["crop_to_patches"] = bool(pre["do_image_splitting"])
    for key in ("image_mean", "image_std", "rescale_factor", "resample"):
        if pre.get(key) is not None:
            out[key] = pre[key]
    if pre.get("do_pad") is False:
        raise ValueError("do_pad=False is not supported")
    return {**out, **flag_fields(pre)}


def coerce(fields: dict[str, Any]) -> dict[str, Any]:
    """do_image_splitting (crop_to_patches) as a bool."""
    out = dict(fields)
    if out.get("crop_to_patches") is not None:
        out["crop_to_patches"] = bool(out["crop_to_patches"])
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the tile is a published one and the longest edge positive."""
    if cfg.patch_size not in SEQ_LEN:
        raise ValueError(f"{cfg.family}'s tile (max_image_size) must be one of the published "
                         f"{sorted(SEQ_LEN)} (its tokens per frame), got {cfg.patch_size}")
    if not cfg.longest_edge or cfg.longest_edge < 1:
        raise ValueError(f"{cfg.family} needs a positive size longest_edge")
    if cfg.merge_size != 1 or cfg.temporal_patch_size != 1:
        raise ValueError(f"{cfg.family} takes merge_size 1 and temporal_patch_size 1")
    if cfg.crop_to_patches is None:
        raise ValueError(f"{cfg.family} needs crop_to_patches (do_image_splitting)")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Idefics3 / SmolVLM constructor arguments for cfg."""
    return dict(size={"longest_edge": cfg.longest_edge},
                max_image_size={"longest_edge": cfg.patch_size},
                do_image_splitting=bool(cfg.crop_to_patches), image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample, do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Idefics3 attributes transformers' class holds."""
    return dict(size={"longest_edge": cfg.longest_edge},
                max_image_size={"longest_edge": cfg.patch_size},
                do_image_splitting=bool(cfg.crop_to_patches), do_pad=True)


def _read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Constructor arguments as preprocessor_config.json keys (do_pad=True is an attribute)."""
    return {k: v for k, v in kwargs.items()
            if k not in ("do_pad", "return_row_col_info") or v is False and k == "do_pad"}


def _call_kwargs() -> type:
    """Idefics3's call options: transformers' TypedDict (its PIL module needs no torchvision)."""
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorKwargs,
    )

    return Idefics3ImageProcessorKwargs


def _smolvlm_call_kwargs() -> type:
    """SmolVLM's call options: transformers' TypedDict."""
    from transformers.models.smolvlm.image_processing_pil_smolvlm import (
        SmolVLMImageProcessorKwargs,
    )

    return SmolVLMImageProcessorKwargs


# patch_size: the tile, which __call__ reads from max_image_size
CALLS = CallRules({"do_image_splitting": "crop_to_patches", "patch_size": "patch_size"},
                  _call_size, options=_options)
# transformers' Idefics3 / SmolVLM class defaults, for what a folder lacks
CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 364, "longest_edge": 4 * 364, "resample": LANCZOS, "image_mean": HALF,
    "image_std": HALF, "rescale_factor": 1 / 255, "crop_to_patches": True}


def _family(name: str, tile: int, model_type: str, class_name: str, call_kwargs: Any,
            module: str, in_engines: bool = False) -> Family:
    """The Family of Idefics3's image processing under one model type and class name."""
    return Family(
        name, Idefics3Processor,
        ProcessorConfig(name, tile, 1, 1, HALF, HALF, resample=LANCZOS,
                        longest_edge=4 * tile, crop_to_patches=True),
        frozenset({"rescale_factor", "longest_edge", "crop_to_patches"}), read_folder, CALLS,
        folder_defaults=CLASS_DEFAULTS, validate=validate, model_types=(model_type,),
        coerce=coerce, recognizes=names_class(class_name),
        reference=Reference(transformers_classes(module, class_name), _reference_kwargs),
        dropin=DropIn({class_name: "torchvision", f"{class_name}Pil": "pil"}, _attributes,
                      call_kwargs, lambda kwargs, name=name: name, _read_kwargs,
                      outputs=("pixel_values", "pixel_attention_mask"), in_engines=in_engines,
                      count_patches=count_patches, optional_outputs=("rows", "cols")))


# HuggingFaceM4/Idefics3-8B-Llama3 preprocessor_config.json (Idefics3ImageProcessor): size
# {"longest_edge": 1456}, max_image_size {"longest_edge": 364}, resample 1 (LANCZOS), mean / std
# 0.5, rescale 1/255, do_image_splitting, do_pad true. HuggingFaceTB/SmolVLM-Instruct is
# model_type idefics3 too (its classes are Idefics3's), with 1536 / 384. In the engines:
# tests/engines/test_engine_vllm_tiles.py (SGLang has no Idefics3 model).
register(_family("idefics3", 364, "idefics3", "Idefics3ImageProcessor", _call_kwargs,
                 "idefics3", in_engines=True))
# HuggingFaceTB/SmolVLM2-256M-Video-Instruct / -500M- (model_type smolvlm,
# SmolVLMImageProcessor): size {"longest_edge": 2048}, max_image_size {"longest_edge": 512}, the
# rest as Idefics3's; SmolVLM2-2.2B-Instruct: 1536 / 384. In the engines:
# tests/engines/test_engine_vllm_tiles.py (SGLang has no SmolVLM model).
register(_family("smolvlm", 512, "smolvlm", "SmolVLMImageProcessor", _smolvlm_call_kwargs,
                 "smolvlm", in_engines=True))

__all__ = ["Idefics3Processor", "frames"]
