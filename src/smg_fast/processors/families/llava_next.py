"""LLaVA-NeXT (LLaVA 1.6): a base tile, then the image's best-resolution canvas cut into tiles.

transformers' LlavaNextImageProcessorPil / LlavaNextImageProcessor: among image_grid_pinpoints
the canvas that keeps the most of the image is chosen, the image is fitted inside it (BICUBIC:
Pillow's, or torch's uint8 antialiased one), centred on zero pixels and cut into tile x tile
tiles row by row; the whole image squashed to one tile goes before them (processors/tiles.py).
The tile is crop_size (336 published), which must equal size's shortest_edge (then every later
resize and centre crop keeps a tile as it is). Rescale and normalize as transformers' classes
do: pixel_values [images, most tiles + 1, 3, tile, tile], each image's tiles zero-padded (0.0)
to the call's largest count, and image_sizes (int64 [height, width] of each input). The compact
format carries it where pixel 0 normalizes to +0.0 (that padding is literal zeros: zero_rows),
and refuses it otherwise (the published mean / std). The tokens of
an image are LlavaNextProcessor's count for the published llava-hf checkpoints (vision patch
14, one CLS token dropped by the default feature strategy). Registers the family."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ...compact import CompactTensor
from ...errors import UnsupportedCallError
from ...imaging.media import ImageInput
from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..option_types import exact_flag, exact_size
from ..plan import Plan, check_aspect
from ..processor import _MAX_VARIANTS, Processor, ProcessorOutput
from ..registry import Family, check_config, register
from ..tiles import anyres_plan, best_resolution

# llava-hf/llava-v1.6-*-hf preprocessor_config.json's image_grid_pinpoints (transformers'
# class default too): (height, width) canvases of 336-pixel tiles
PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))
MAX_CANVAS_TILES = 1024  # tiles in one pinpoint: bounds the output of any config
VISION_PATCH = 14  # the CLIP tower's patch: 24 x 24 features per 336-pixel tile
_CALL_OWN = ("size", "crop_size", "do_center_crop", "do_pad", "image_grid_pinpoints")


def unpadded_features(height: int, width: int, side: int, scale_h: int,
                      scale_w: int) -> tuple[int, int]:
    """(features, newline features) of the tiles' grid once its padding is cut away.

    As LlavaNextProcessor counts them: the side x side features of each tile, the rows (or
    columns) the image's centring padded removed."""
    cur_h, cur_w = side * scale_h, side * scale_w
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= (cur_h - new_h) // 2 * 2
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= (cur_w - new_w) // 2 * 2
    return cur_h * cur_w, cur_h


class LlavaNextProcessor(Processor):
    """LLaVA-NeXT's base tile and best-resolution tiles, (3, tile, tile) each."""

    zero_rows = True  # the batch pads images' tiles with literal zeros (module docstring)
    crops = True  # crop_size (the tile) stays the config's unless a call names it

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        self.best_canvas(width, height, index)
        return anyres_plan(width, height, self.config.patch_size,
                           self.config.image_grid_pinpoints or PINPOINTS)

    def best_canvas(self, width: int, height: int, index: int = 0) -> tuple[int, int]:
        """(height, width) of the image's best resolution, which must be whole tiles.

        UnsupportedCallError where it is not (transformers' class defaults: 224-pixel tiles, the
        336-pixel pinpoints): transformers then resizes each partial tile on its own, which
        smg-fast does not compute (smg_fast.hf hands such calls to transformers' class)."""
        side = self.config.patch_size
        res_h, res_w = best_resolution(width, height, self.config.image_grid_pinpoints
                                       or PINPOINTS)
        if res_h % side or res_w % side:
            raise UnsupportedCallError(f"image {index}: its best resolution {res_h}x{res_w} is "
                                       f"not whole {side}-pixel tiles (transformers resizes the "
                                       f"partial tiles one by one; smg-fast does not compute it)")
        return res_h, res_w

    def _layout(self) -> tuple[int, int]:
        return 1, 1  # row-major tiles, each a channel-first (3, tile, tile) image

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        """(1, tiles, 3, side, side): one image's output as transformers returns it alone.

        A batch's planned output is all its tiles in one such row; __call__ regroups them."""
        side = self.config.patch_size
        return (1, rows, 3, side, side)

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        """The tiles of a call's runs of images (float images next to uint8 ones), in order."""
        return np.concatenate(parts, axis=1)

    def image_tokens(self, height: int, width: int) -> int:
        """LLM tokens of a height x width image."""
        side = self.config.patch_size
        res_h, res_w = self.best_canvas(width, height)
        feats = side // VISION_PATCH
        unpadded, newlines = unpadded_features(height, width, feats, res_h // side,
                                               res_w // side)
        return unpadded + newlines + feats * feats  # the CLS token (+1) dropped (-1)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        """Tokens per image for grid rows [1, height, width] (the images' own sizes)."""
        return np.array([self.image_tokens(int(h), int(w)) for _, h, w in grid], np.int64)

    def tiles_per_image(self, grid: np.ndarray) -> list[int]:
        """Output tiles of each image (its base and its canvas's) for rows [1, height, width]."""
        return [self.plan(int(w), int(h)).rows for _, h, w in grid]

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...] | None = None,
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """Processor.__call__, reading LLaVA's own options.

        ``image_grid_pinpoints``, ``size`` / ``crop_size`` (the tile: {"shortest_edge": n},
        {"height": n, "width": n}, equal where both are given), ``do_center_crop`` (a crop to
        the tile changes nothing) and ``do_pad=True`` (the default; False, transformers' list of
        unpadded images, is not computed)."""
        own = {k: options.pop(k) for k in _CALL_OWN if k in options}
        proc = self._for_call({k: v for k, v in own.items() if v is not None})
        return Processor.__call__(proc, images, return_tensors, dtype,
                                  channels_first_wins=channels_first_wins, **options)

    def _for_call(self, own: dict[str, Any]) -> Any:
        """This processor, or one for a call's tile size and pinpoints (UnsupportedCallError)."""
        for key in ("size", "crop_size"):  # a dict of ints (other forms: handed over)
            if own.get(key) is not None:
                exact_size(key, own[key])
        for key in ("do_pad", "do_center_crop"):
            if own.get(key) is not None:
                exact_flag(key, own[key])
        if own.get("do_pad") is False:
            raise UnsupportedCallError("do_pad=False (a list of unpadded images) is not "
                                       "computed by smg-fast")
        cfg = self.config
        try:
            crop = own.get("crop_size")
            if crop is None and self.crops:
                crop = {"height": cfg.patch_size, "width": cfg.patch_size}
            side = call_tile(own.get("size"), crop, cfg.patch_size)
            pins = cfg.image_grid_pinpoints
            if own.get("image_grid_pinpoints") is not None:
                pins = read_pinpoints(own["image_grid_pinpoints"], ints_only=True)
            if (side, pins) == (cfg.patch_size, cfg.image_grid_pinpoints):
                return self
            key = (("image_grid_pinpoints", pins), ("patch_size", side))
            with self._lock:
                hit = self._variants.get(key)
            if hit is not None:
                return hit  # a LlavaNextProcessor: only this method keeps one under such a key
            new = dataclasses.replace(cfg, patch_size=side, image_grid_pinpoints=pins)
            check_config(new)
        except (TypeError, ValueError) as exc:
            raise UnsupportedCallError(str(exc)) from None
        proc = type(self)(new)
        with self._lock:  # kept with Processor._variant's processors (the same fields)
            self._variants[key] = proc
            while len(self._variants) > _MAX_VARIANTS:
                self._variants.pop(next(iter(self._variants)))
        return proc

    def _wrap(self, pixel_values: Any, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        counts = self.tiles_per_image(grid)
        side = self.config.patch_size
        if isinstance(pixel_values, CompactTensor):
            c = pixel_values
            batched: Any = CompactTensor(by_image(c.codes, counts, side), c.lut, c.dtype, c.run)
        else:
            batched = by_image(pixel_values, counts, side)
        out = super()._wrap(batched, grid, tokens, return_tensors, dtype_name)
        sizes = np.ascontiguousarray(grid[:, 1:])
        if return_tensors == "pt":
            import torch

            out["image_sizes"] = torch.from_numpy(sizes)
        else:
            out["image_sizes"] = sizes
        del out["image_grid_thw"]  # not LLaVA's: image_sizes says each image's size
        return out


def by_image(tiles: Any, counts: list[int], side: int) -> Any:
    """A call's tiles (NumPy or torch, in order) as [images, most tiles, 3, side, side].

    transformers' _pad_for_batching: zero tiles after each image's own."""
    most = max(counts)
    tiles = tiles.reshape(-1, 3, side, side)
    if all(c == most for c in counts):
        return tiles.reshape(len(counts), most, 3, side, side)
    shape = (len(counts), most, 3, side, side)
    if isinstance(tiles, np.ndarray):
        out = np.zeros(shape, tiles.dtype)
    else:
        import torch

        out = torch.zeros(shape, dtype=tiles.dtype)
    start = 0
    for i, c in enumerate(counts):
        out[i, :c] = tiles[start:start + c]
        start += c
    return out


def _side(size: dict[str, Any]) -> int:
    """The square side a size dict names: {"shortest_edge": n} or {"height": n, "width": n}."""
    d = {k: v for k, v in dict(getattr(size, "__dict__", None) or size).items() if v is not None}
    if set(d) == {"shortest_edge"}:
        return int(d["shortest_edge"])
    if set(d) == {"height", "width"} and d["height"] == d["width"]:
        return int(d["height"])
    raise ValueError(f"smg-fast computes LLaVA's tiles from a size {{'shortest_edge': n}} or a "
                     f"square {{'height': n, 'width': n}} only, got {size}")


def call_tile(size: Any, crop_size: Any, side: int) -> int:
    """The tile side of a size and a crop_size (either may be None: side stays)."""
    sides = {_side(s) for s in (size, crop_size) if s is not None}
    if len(sides) > 1:
        raise ValueError(f"smg-fast computes LLaVA's tiles where size and crop_size name one "
                         f"side, got size {size} and crop_size {crop_size}")
    return sides.pop() if sides else side


def read_pinpoints(pins: Any, ints_only: bool = False) -> tuple[tuple[int, int], ...]:
    """image_grid_pinpoints ([[height, width], ...]) as a tuple of positive int pairs.

    ints_only: each value must be a Python int already (transformers' strict call kwargs)."""
    try:
        pairs = [(h, w) for h, w in pins]
        if ints_only and any(type(v) is not int for pair in pairs for v in pair):
            raise TypeError
        out = tuple((int(h), int(w)) for h, w in pairs)
    except (TypeError, ValueError):
        raise ValueError(f"image_grid_pinpoints must be [[height, width], ...] of ints, got "
                         f"{pins!r}") from None
    if not out or any(h < 1 or w < 1 for h, w in out):
        raise ValueError(f"image_grid_pinpoints must be positive [height, width] pairs, "
                         f"got {pins!r}")
    return out


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a LLaVA-NeXT / OneVision preprocessor_config.json."""
    out: dict[str, Any] = {}
    crop = pre.get("crop_size") or None
    if pre.get("size") is not None or crop is not None:  # else the class default's tile
        out["patch_size"] = call_tile(pre.get("size"), crop, 0)
    if pre.get("image_grid_pinpoints") is not None:
        out["image_grid_pinpoints"] = read_pinpoints(pre["image_grid_pinpoints"])
    for key in ("image_mean", "image_std", "rescale_factor", "resample"):
        if pre.get(key) is not None:
            out[key] = pre[key]
    if pre.get("do_pad") is False:
        raise ValueError("do_pad=False is not supported")
    return {**out, **flag_fields(pre)}


def coerce(fields: dict[str, Any]) -> dict[str, Any]:
    """image_grid_pinpoints as the config's tuple of (height, width) pairs."""
    out = dict(fields)
    if out.get("image_grid_pinpoints") is not None:
        out["image_grid_pinpoints"] = read_pinpoints(out["image_grid_pinpoints"])
    return out


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless the layout is one tile per patch and the pinpoints are bounded.

    A pinpoint need not be whole tiles (transformers' class defaults are not): an image whose
    best resolution it is raises UnsupportedCallError when planned (best_canvas)."""
    if cfg.merge_size != 1 or cfg.temporal_patch_size != 1:
        raise ValueError(f"{cfg.family} takes merge_size 1 and temporal_patch_size 1")
    if not cfg.image_grid_pinpoints:
        raise ValueError(f"{cfg.family} needs image_grid_pinpoints")
    side = cfg.patch_size
    if cfg.family == "llava_next" and side < VISION_PATCH:
        raise ValueError(f"llava_next's tile must be at least the vision patch ({VISION_PATCH}), "
                         f"whose features LlavaNextProcessor counts per tile, got {side}")
    for h, w in cfg.image_grid_pinpoints:
        if -(-h // side) * -(-w // side) > MAX_CANVAS_TILES:
            raise ValueError(f"an image_grid_pinpoints entry may hold at most "
                             f"{MAX_CANVAS_TILES} tiles, got [{h}, {w}]")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' LlavaNext constructor arguments for cfg."""
    side = cfg.patch_size
    return dict(size={"shortest_edge": side}, crop_size={"height": side, "width": side},
                image_grid_pinpoints=[list(p) for p in cfg.image_grid_pinpoints],
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std),
                rescale_factor=cfg.rescale_factor, resample=cfg.resample,
                do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The LlavaNext attributes transformers' class holds."""
    side = cfg.patch_size
    return dict(size={"shortest_edge": side}, crop_size={"height": side, "width": side},
                image_grid_pinpoints=[list(p) for p in cfg.image_grid_pinpoints],
                do_center_crop=True, do_pad=True)


def _call_kwargs() -> type:
    """LlavaNext's call options: transformers' TypedDict (its PIL module needs no torchvision)."""
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorKwargs,
    )

    return LlavaNextImageProcessorKwargs


def read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """transformers' constructor arguments as preprocessor_config.json keys.

    do_pad=True and do_center_crop are left out: the drop-in holds them as attributes."""
    return {k: v for k, v in kwargs.items()
            if k != "do_center_crop" and (k != "do_pad" or v is False)}


def _own_call_options(opts: dict[str, Any]) -> dict[str, Any]:
    """The options left once LLaVA's own are out (its processor's __call__ reads those).

    LlavaNextProcessor passes do_pad=True on every call; its __call__ refuses what it does not
    compute (do_pad=False), so the drop-in hands that call to transformers."""
    return {k: v for k, v in opts.items() if k not in _CALL_OWN}


# llava-hf/llava-v1.6-mistral-7b-hf preprocessor_config.json (as transformers' docs and tests
# give it; no hub access here): LlavaNextImageProcessor, size {"shortest_edge": 336},
# crop_size {"height": 336, "width": 336}, image_grid_pinpoints PINPOINTS, resample 3
# (BICUBIC), rescale 1/255, OpenAI CLIP mean / std, do_center_crop, do_pad, do_convert_rgb
# true; config.json model_type "llava_next".
register(Family(
    "llava_next", LlavaNextProcessor,
    ProcessorConfig("llava_next", 336, 1, 1, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, resample=3,
                    image_grid_pinpoints=PINPOINTS),
    frozenset({"rescale_factor", "image_grid_pinpoints"}), read_folder,
    CallRules({}, options=_own_call_options),
    # transformers' class defaults, for what a folder lacks: shortest_edge / crop 224 (a folder
    # naming neither gets 224-pixel tiles), the 336-pixel pinpoints, BICUBIC, CLIP mean / std
    folder_defaults={"patch_size": 224, "image_grid_pinpoints": PINPOINTS, "resample": 3,
                     "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
                     "rescale_factor": 1 / 255},
    validate=validate, model_types=("llava_next",), coerce=coerce,
    recognizes=names_class("LlavaNextImageProcessor"),
    reference=Reference(transformers_classes("llava_next", "LlavaNextImageProcessor"),
                        _reference_kwargs),
    dropin=DropIn({"LlavaNextImageProcessor": "torchvision",
                   "LlavaNextImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "llava_next", read_kwargs,
                  # in_engines: tests/engines/test_engine_vllm_tiles.py (SGLang has no
                  # LLaVA-NeXT model for the -hf checkpoints)
                  outputs=("pixel_values", "image_sizes"), in_engines=True,
                  lists_when_untyped=True,
                  list_outputs=("image_sizes",))))

__all__ = ["PINPOINTS", "LlavaNextProcessor", "by_image", "call_tile", "read_pinpoints",
           "unpadded_features"]
