"""The family registry: the one place each family says what it is; everything else asks here.

Each family says once, in its module under processors/families/, how it is configured, computed,
called, compared and stood in for; the loader, the server, the CLIs, the drop-ins and the reference
builder ask here.

A family registers a ``Family``: its built-in config, the options a model folder or a caller may
set, how it reads a HuggingFace ``preprocessor_config.json`` and recognizes one, its Processor
subclass (the size rule and the patch layout), how it reads transformers' call options, its
transformers reference and its drop-in class. Adding a family is one new module that calls
``register`` (and its line in processors/families/__init__.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import ProcessorConfig, coerce_fields, validate_common
from .folders import auto_backend
from .hooks import CallRules, DropIn, Reference

# Options every family takes (input limits and the resampling rule, not the model's config).
COMMON_OPTIONS = frozenset({"max_image_pixels", "pass_order", "image_formats", "resample",
                            "patch_size", "merge_size", "image_mean", "image_std", "backend",
                            "do_normalize"})


def _same(fields: dict[str, Any]) -> dict[str, Any]:
    """The default ``Family.coerce``: the family spells every field as the config does."""
    return fields


@dataclass(frozen=True)
class Family:
    """One model family: what it computes and everything its callers need to know of it."""

    name: str
    processor: type  # its Processor subclass (processors/processor.py): size rule, layout
    builtin: ProcessorConfig
    options: frozenset[str]  # fields a model folder or a caller may set, beyond COMMON_OPTIONS
    # preprocessor_config.json -> fields (folder keys it lacks take these defaults first)
    read_folder: Callable[[dict[str, Any]], dict[str, Any]]
    calls: CallRules  # transformers' call-time options that mean something for this family
    folder_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    validate: Callable[[ProcessorConfig], None] = lambda cfg: None
    model_types: tuple[str, ...] = ()  # config.json model_type values that mean this family
    # a preprocessor_config.json without a known model_type: is it this family's?
    recognizes: Callable[[dict[str, Any]], bool] = lambda pre: False
    # recognizes() is proof enough even when config.json names an unknown model_type (a format
    # no other model uses, such as Kimi's media_proc_cfg)
    unambiguous: bool = False
    # the backends it implements; the built-in config names the default
    backends: tuple[str, ...] = ("pil", "torchvision")
    # its own spellings of fields (from a folder or a caller), as the config's
    coerce: Callable[[dict[str, Any]], dict[str, Any]] = _same
    # (backend or None for the default, why) for a folder whose preprocessor_config.json names
    # this class ("" for none): what transformers' Auto classes resolve for it
    folder_backend: Callable[[str], tuple[str | None, str]] = auto_backend
    reference: Reference | None = None  # transformers' own class, per backend
    dropin: DropIn | None = None  # the class smg_fast.hf offers for it


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Adds family to the registry (ValueError when its name is taken); returns it."""
    if family.name in _FAMILIES:
        raise ValueError(f"family {family.name!r} is registered twice")
    _FAMILIES[family.name] = family
    return family


def names() -> tuple[str, ...]:
    """The registered family names, in registration order."""
    return tuple(_FAMILIES)


def registered() -> tuple[Family, ...]:
    """The registered families, in registration order."""
    return tuple(_FAMILIES.values())


def get_family(name: str) -> Family:
    """The family registered as name; ValueError naming the registered ones otherwise."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}: use one of {names()}") from None


def build_config(family: str, fields: dict[str, Any]) -> ProcessorConfig:
    """Applies fields (from a folder or a caller) to a family's built-in config, validated."""
    fam = get_family(family)
    allowed = COMMON_OPTIONS | fam.options
    unknown = set(fields) - allowed
    if unknown:
        raise TypeError(f"unknown option(s) for {family}: {sorted(unknown)}; "
                        f"allowed: {sorted(allowed)}")
    cfg = dataclasses.replace(fam.builtin, **coerce_fields(fam.coerce(fields)))
    check_config(cfg)
    return cfg


def check_config(cfg: ProcessorConfig) -> None:
    """ValueError unless cfg passes the common checks and its family's own."""
    validate_common(cfg)
    fam = get_family(cfg.family)
    if cfg.backend not in fam.backends:
        raise ValueError(f"{cfg.family} has no {cfg.backend!r} backend; use one of {fam.backends}")
    fam.validate(cfg)


def config_from_preprocessor(family: str, pre: dict[str, Any],
                             overrides: dict[str, Any]) -> ProcessorConfig:
    """A family's config from a preprocessor_config.json's keys, then overrides (which win).

    The keys are read as a model folder's are: what it lacks takes the transformers class
    defaults."""
    fam = get_family(family)
    return build_config(fam.name, {**fam.folder_defaults, **fam.read_folder(pre), **overrides})


__all__ = ["COMMON_OPTIONS", "Family", "build_config", "check_config", "config_from_preprocessor",
           "get_family", "names", "register", "registered"]
