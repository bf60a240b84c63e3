"""Pixtral: each image resized under a longest edge to patch multiples, output whole.

An image whose larger side passes longest_edge (1024 published) is scaled by that ratio, each
side floored; each side is then rounded up to a multiple of patch_size (16), so small images grow
to the next multiple. BICUBIC (Pillow's for the PIL backend, torch's uint8 antialiased one for
torchvision), rescaled by 1/255 and normalized with CLIP's mean / std. Each image is one
channel-first (3, H, W) tensor; a call's images are zero-padded at the bottom and right to the
largest H and the largest W among them and stacked: pixel_values [N, 3, H, W], and image_sizes
(int64 [h, w] per image, before padding). The compact format refuses this family
(compact_exact False): its channel runs are whole images, whose size varies, not the fixed run
the format carries, and the padding is literal zeros. Each image is
rows * (columns + 1) tokens in the prompt (a break token ends each row of patches). Registers
the family: transformers' PixtralImageProcessorPil / PixtralImageProcessor are its reference
(what Pixtral checkpoints in transformers' format name, under model_type llava); the
mistral_common code vLLM runs for mistralai/* checkpoints is not."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import InvalidImageError, UnsupportedCallError
from ...imaging.media import ImageInput
from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..folders import flag_fields
from ..hooks import CallRules, DropIn, Reference, names_class, transformers_classes
from ..option_types import exact_flag, exact_int, exact_size
from ..plan import Plan, check_aspect
from ..processor import Processor, ProcessorOutput
from ..registry import Family, register
from . import pixtral_mistral
from .pixtral_mistral import UPSTREAM


def pixtral_size(height: int, width: int, longest_edge: int, patch: int) -> tuple[int, int]:
    """(height, width) of the resize, in transformers' float arithmetic.

    Scaled under longest_edge (sides floored), then each side rounded up to a patch multiple."""
    ratio = max(height / longest_edge, width / longest_edge)
    if ratio > 1:
        height = int(math.floor(height / ratio))
        width = int(math.floor(width / ratio))
    return ((height - 1) // patch + 1) * patch, ((width - 1) // patch + 1) * patch


class PixtralProcessor(Processor):
    """Pixtral's longest-edge resize to patch multiples; whole images padded to one canvas."""

    compact_exact = False  # channel runs of H * W per image, zero padding (module docstring)

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=math.inf)  # zero-size check only
        size = pixtral_mistral.mistral_size if cfg.backend == UPSTREAM else pixtral_size
        h, w = size(height, width, int(cfg.longest_edge or 0), cfg.patch_size)
        if h < 1 or w < 1:  # transformers' resize fails on the zero side too
            raise InvalidImageError(index, f"a {width}x{height} image scales to a zero side "
                                           f"under longest_edge {cfg.longest_edge}")
        p = cfg.patch_size
        return Plan(resize_w=w, resize_h=h, grid_h=h // p, grid_w=w // p)

    @property
    def call_only(self) -> str | None:
        """Why only the library call computes this configuration (the upstream backend)."""
        return pixtral_mistral.CALL_ONLY if self.config.backend == UPSTREAM else None

    def plan_batch(self, images: Any, dtype: Any = "float32") -> Any:
        """Processor.plan_batch; the upstream backend is refused (UnsupportedCallError).

        mistral_common's numerics are computed by the call only (pixtral_mistral.call), not by
        the native pipeline that plan_batch feeds (the service's path)."""
        if self.config.backend == UPSTREAM:
            raise UnsupportedCallError(pixtral_mistral.CALL_ONLY)
        return super().plan_batch(images, dtype)

    def _layout(self) -> tuple[int, int]:
        return 1, 1

    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        p = self.config.patch_size
        return (rows, 3, p, p)  # unused: canvas() shapes every batch

    def canvas(self, plans: list[Plan]) -> tuple[int, int, int] | None:
        p = self.config.patch_size
        return (3, max(pl.grid_h for pl in plans) * p, max(pl.grid_w for pl in plans) * p)

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        return grid[:, 1] * (grid[:, 2] + 1)

    def __call__(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                 return_tensors: str | None = "np", dtype: Any = "float32", *,
                 channels_first_wins: bool = False, **options: Any) -> ProcessorOutput:
        """Processor.__call__, reading do_pad and a {"height": n, "width": n} patch_size.

        do_pad=True (transformers' default) is what it computes. The upstream backend is
        mistral_common's numerics (pixtral_mistral.call)."""
        if self.config.backend == UPSTREAM:
            return pixtral_mistral.call(self, images, return_tensors, dtype, options)
        pad = options.pop("do_pad", None)
        if pad is not None:
            exact_flag("do_pad", pad)
        if pad is False:
            raise UnsupportedCallError("do_pad=False (a list of unpadded images) is not "
                                       "computed by smg-fast")
        patch = self.config.patch_size
        if options.get("patch_size") is not None:
            patch = options["patch_size"] = _square_patch(_call_patch(options["patch_size"]))
        out = super().__call__(images, return_tensors, dtype,
                               channels_first_wins=channels_first_wins, **options)
        if patch != self.config.patch_size:  # _wrap counted this processor's patches
            out["image_sizes"] = out["image_sizes"] // self.config.patch_size * patch
        return out

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        """Runs of images padded to the call's largest canvas, then stacked."""
        h = max(p.shape[2] for p in parts)
        w = max(p.shape[3] for p in parts)
        out = np.zeros((sum(len(p) for p in parts), 3, h, w), dtype=parts[0].dtype)
        i = 0
        for p in parts:
            out[i:i + len(p), :, :p.shape[2], :p.shape[3]] = p
            i += len(p)
        return out

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        out = super()._wrap(pixel_values, grid, tokens, return_tensors, dtype_name)
        sizes = np.ascontiguousarray(grid[:, 1:] * self.config.patch_size)
        if return_tensors == "pt":
            import torch

            out["image_sizes"] = torch.from_numpy(sizes)
        else:
            out["image_sizes"] = sizes
        del out["image_grid_thw"]  # not Pixtral's: image_sizes says each image's size
        return out


def _call_patch(patch: Any) -> Any:
    """A call's patch_size when of a type transformers takes (an int, a dict of ints)."""
    if isinstance(patch, (int, float, str, bytes, np.generic)):
        return exact_int("patch_size", patch)
    return exact_size("patch_size", patch)


def _square_patch(patch: Any) -> int:
    """transformers' patch_size {"height": n, "width": n} (or an int) as n."""
    if isinstance(patch, int) and not isinstance(patch, bool):
        return patch
    d = {k: v for k, v in dict(getattr(patch, "__dict__", None) or patch).items()
         if v is not None}
    if set(d) != {"height", "width"} or d["height"] != d["width"]:
        raise UnsupportedCallError(f"smg-fast computes square Pixtral patches "
                                   f"{{'height': n, 'width': n}} only, got {patch}")
    return int(d["height"])


def _call_size(size: dict[str, Any]) -> dict[str, Any]:
    """transformers' size option as longest_edge.

    It is {"longest_edge": n}, or a square {"height": n, "width": n} (the same limit)."""
    if set(size) == {"longest_edge"}:
        return {"longest_edge": int(size["longest_edge"])}
    if "longest_edge" not in size and {"height", "width"} <= set(size) and \
            size["height"] == size["width"]:
        return {"longest_edge": int(size["height"])}
    raise UnsupportedCallError(f"smg-fast computes Pixtral's size {{'longest_edge': n}} (or a "
                               f"square height / width) only, got {size}")


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Pixtral preprocessor_config.json."""
    out: dict[str, Any] = {}
    size = pre.get("size")
    if isinstance(size, dict):
        try:
            out.update(_call_size({k: v for k, v in size.items() if v is not None}))
        except UnsupportedCallError as exc:
            raise ValueError(str(exc)) from None
    elif size is not None:
        raise ValueError(f"size must be {{'longest_edge': n}}, got {size!r}")
    if pre.get("patch_size") is not None:
        try:
            out["patch_size"] = _square_patch(pre["patch_size"])
        except UnsupportedCallError as exc:
            raise ValueError(str(exc)) from None
    for key in ("image_mean", "image_std", "rescale_factor", "resample"):
        if pre.get(key) is not None:
            out[key] = pre[key]
    if pre.get("do_pad") is False:
        raise ValueError("do_pad=False is not supported")
    if pre.get("do_center_crop"):
        raise ValueError("do_center_crop=True is not supported")
    return {**out, **flag_fields(pre)}


def validate(cfg: ProcessorConfig) -> None:
    """ValueError unless longest_edge is positive and the layout is whole images."""
    if not cfg.longest_edge or cfg.longest_edge < 1:
        raise ValueError("pixtral needs a positive longest_edge")
    if cfg.merge_size != 1 or cfg.temporal_patch_size != 1:
        raise ValueError("pixtral takes merge_size 1 and temporal_patch_size 1")
    if cfg.patch_size > 64:
        raise ValueError(f"pixtral's patch_size must be 1..64, got {cfg.patch_size}")


def _reference_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    """transformers' Pixtral constructor arguments for cfg."""
    p = cfg.patch_size
    return dict(size={"longest_edge": cfg.longest_edge}, patch_size={"height": p, "width": p},
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std),
                rescale_factor=cfg.rescale_factor, resample=cfg.resample,
                do_normalize=cfg.do_normalize)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The Pixtral attributes transformers' class holds."""
    p = cfg.patch_size
    return dict(size={"longest_edge": cfg.longest_edge}, patch_size={"height": p, "width": p},
                do_pad=True)


def _call_kwargs() -> type:
    """Pixtral's call options: transformers' TypedDict (its PIL module needs no torchvision)."""
    from transformers.models.pixtral.image_processing_pil_pixtral import (
        PixtralImageProcessorKwargs,
    )

    return PixtralImageProcessorKwargs


def _read_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """transformers' constructor arguments as preprocessor_config.json keys.

    do_pad=True is left out: the drop-in holds it as an attribute (the default)."""
    return {k: v for k, v in kwargs.items() if k != "do_pad" or v is False}


# Published mistral-community/pixtral-12b preprocessor_config.json (PixtralImageProcessor):
# size {"longest_edge": 1024}, patch_size {"height": 16, "width": 16}, resample 3 (BICUBIC),
# rescale 1/255, CLIP mean / std, do_convert_rgb, do_normalize, do_rescale, do_resize true.
register(Family(
    "pixtral", PixtralProcessor,
    ProcessorConfig("pixtral", 16, 1, 1, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, resample=3,
                    longest_edge=1024),
    frozenset({"rescale_factor", "longest_edge"}), read_folder,
    CallRules({"patch_size": "patch_size"}, _call_size),
    # transformers' class defaults, for what a folder lacks: the same values as the hub's
    folder_defaults={"patch_size": 16, "longest_edge": 1024, "resample": 3,
                     "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
                     "rescale_factor": 1 / 255},
    validate=validate, model_types=("pixtral",), backends=("pil", "torchvision", UPSTREAM),
    # the hub's Pixtral checkpoints say model_type llava: their processor type tells them apart
    recognizes=names_class("PixtralImageProcessor"), unambiguous=True,
    reference=Reference(transformers_classes("pixtral", "PixtralImageProcessor"),
                        _reference_kwargs,
                        missing={UPSTREAM: "mistral_common's ImageEncoder (what vLLM runs for "
                                           "Mistral-format checkpoints) is not in transformers"}),
    dropin=DropIn({"PixtralImageProcessor": "torchvision", "PixtralImageProcessorPil": "pil"},
                  _attributes, _call_kwargs, lambda kwargs: "pixtral", _read_kwargs,
                  # in_engines: tests/engines/test_engine_{vllm,sglang}_tiles.py
                  outputs=("pixel_values", "image_sizes"), in_engines=True,
                  list_outputs=("image_sizes",))))

__all__ = ["PixtralProcessor", "pixtral_size"]
