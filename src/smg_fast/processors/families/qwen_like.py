"""The Family of a processor sized like Qwen's: one builder for PaddleOCR-VL, ERNIE, HunyuanOCR.

transformers' classes for these families take Qwen's constructor arguments and call options
(``size`` as shortest/longest edge in pixels, patch, merge and temporal sizes), hold the same
attributes and count patches with their own resize rule, so each family module gives only what
differs: its processor (size rule, patch layout), built-in config, class defaults, resize rule
for ``get_number_of_image_patches`` and transformers' class names."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..config import ProcessorConfig
from ..hooks import CallRules, DropIn, Reference
from ..registry import Family
from .qwen import _OPTIONS, CALLS, _reference_kwargs, read_folder, validate

Resize = Callable[[int, int, int, int, int], "tuple[int, int]"]


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The attributes these transformers classes hold beyond every family's."""
    return dict(temporal_patch_size=cfg.temporal_patch_size,
                size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels})


def patch_counter(resize: Resize,
                  as_grid: bool = False) -> Callable[..., int | tuple[int, int]]:
    """get_number_of_image_patches as transformers' classes compute it with resize.

    From the drop-in's attributes and a call's options: the grid cells (h * w), or with as_grid
    the (h, w) grid, as HunYuanVL's method returns it."""

    def count(proc: Any, height: int, width: int, kw: dict[str, Any]) -> int | tuple[int, int]:
        lo = kw["min_pixels"] if "min_pixels" in kw else proc.size["shortest_edge"]
        hi = kw["max_pixels"] if "max_pixels" in kw else proc.size["longest_edge"]
        patch = kw.get("patch_size", proc.patch_size)
        h, w = resize(height, width, patch * kw.get("merge_size", proc.merge_size), lo, hi)
        return (h // patch, w // patch) if as_grid else (h // patch) * (w // patch)

    return count


def _typed_dict(path: str) -> Callable[[], type]:
    """A DropIn.call_kwargs that imports transformers' TypedDict "module:Name" when called."""

    def load() -> type:
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]

    return load


def qwen_like_family(name: str, processor: type, builtin: ProcessorConfig,
                     class_defaults: dict[str, Any], resize: Resize,
                     reference: dict[str, str], dropin_name: str, call_kwargs: str, *,
                     calls: CallRules = CALLS,
                     read: Callable[[dict[str, Any]], dict[str, Any]] = read_folder,
                     check: Callable[[ProcessorConfig], None] = validate,
                     as_grid: bool = False,
                     extra_attributes: dict[str, Any] | None = None,
                     in_engines: bool = False) -> Family:
    """The Family of name (its own model_type), computed by processor.

    reference: backend -> "module:Class"; dropin_name: transformers' torchvision class name (its
    PIL class adds "Pil"), which a folder's image_processor_type names; call_kwargs: its
    TypedDict of call options as "module:Name"; extra_attributes: constant attributes its
    classes hold beyond Qwen's (HunYuanVL's spatial_patch_size); in_engines: proven in the
    engines' own pipelines (tests/engines), so the engine plug-ins register it."""
    return Family(
        name, processor, builtin, _OPTIONS, read, calls, class_defaults, check,
        model_types=(name,),
        recognizes=lambda pre: str(pre.get("image_processor_type", "")).startswith(dropin_name),
        reference=Reference(reference, _reference_kwargs),
        dropin=DropIn({dropin_name: "torchvision", f"{dropin_name}Pil": "pil"},
                      lambda cfg: {**_attributes(cfg), **(extra_attributes or {})},
                      _typed_dict(call_kwargs), lambda kwargs: name,
                      count_patches=patch_counter(resize, as_grid), in_engines=in_engines))


__all__ = ["patch_counter", "qwen_like_family"]
