"""The processor registry: each family says once how it is configured and computed, and
everything else (load_processor, the server, the CLIs) asks here.

A family registers its built-in config, the options a model folder or a caller may set, how it
reads a HuggingFace ``preprocessor_config.json``, how it recognizes one, and its Processor
class. Adding a family (or, later, a backend) means one new module that calls ``register``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import ProcessorConfig, coerce_fields, validate_common
from .folders import folder_backend, hub_folder, is_hub_id
from .processor import Processor

logger = logging.getLogger("smg_fast")

# Options every family takes (input limits and the resampling rule, not the model's config).
COMMON_OPTIONS = frozenset({"max_image_pixels", "pass_order", "image_formats", "resample",
                            "patch_size", "merge_size", "image_mean", "image_std", "backend"})


@dataclass(frozen=True)
class Family:
    name: str
    processor: type[Processor]
    builtin: ProcessorConfig
    options: frozenset[str]  # fields a model folder or a caller may set, beyond COMMON_OPTIONS
    # preprocessor_config.json -> fields (folder keys it lacks take these defaults first)
    read_folder: Callable[[dict[str, Any]], dict[str, Any]]
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


_FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    if family.name in _FAMILIES:
        raise ValueError(f"family {family.name!r} is registered twice")
    _FAMILIES[family.name] = family
    return family


def names() -> tuple[str, ...]:
    """The registered family names, in registration order."""
    return tuple(_FAMILIES)


def get_family(name: str) -> Family:
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
    cfg = dataclasses.replace(fam.builtin, **coerce_fields(fields))
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
    """A family's config from a preprocessor_config.json's keys (as a model folder's are read:
    what it lacks takes the transformers class defaults), then overrides (which win)."""
    fam = get_family(family)
    return build_config(fam.name, {**fam.folder_defaults, **fam.read_folder(pre), **overrides})


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def _family_of_folder(folder: str, pre: dict[str, Any]) -> Family:
    cfg_path = os.path.join(folder, "config.json")
    if os.path.isfile(cfg_path):
        model_type = _read_json(cfg_path).get("model_type")
        for fam in _FAMILIES.values():
            if model_type in fam.model_types:
                return fam
        if model_type is not None:
            for fam in _FAMILIES.values():
                if fam.unambiguous and fam.recognizes(pre):
                    return fam
            known = sorted(t for f in _FAMILIES.values() for t in f.model_types)
            raise ValueError(f"{cfg_path}: unsupported model_type {model_type!r}; "
                             f"supported: {known}")
    # unambiguous formats first (Kimi's media_proc_cfg wins over a Qwen processor type)
    for fam in sorted(_FAMILIES.values(), key=lambda f: not f.unambiguous):
        if fam.recognizes(pre):
            return fam
    raise ValueError(f"{folder}: cannot tell the model family (no config.json model_type and "
                     "a preprocessor_config.json no registered family recognizes)")


def resolve_config(name_or_dir: str | os.PathLike[str],
                   overrides: dict[str, Any]) -> ProcessorConfig:
    """A family name or a HuggingFace model folder, then overrides (which win)."""
    key = os.fspath(name_or_dir)
    if key in _FAMILIES:
        return build_config(key, overrides)
    if os.path.isdir(key):
        pre_path = os.path.join(key, "preprocessor_config.json")
        if not os.path.isfile(pre_path):
            raise ValueError(f"model folder {key!r} has no preprocessor_config.json")
        pre = _read_json(pre_path)
        fam = _family_of_folder(key, pre)
        fields = {**fam.folder_defaults, **fam.read_folder(pre), **overrides}
        return build_config(fam.name, fields)
    if os.sep in key or key.startswith((".", "~")):
        raise ValueError(f"no such model folder: {key!r} (built-in families: "
                         f"{', '.join(names())})")
    raise ValueError(f"unknown processor {key!r}: use one of {names()} or a model folder")


def make_processor(config: ProcessorConfig) -> Processor:
    """The processor its family registered for config."""
    return get_family(config.family).processor(config)


def load_processor(name_or_dir: str | os.PathLike[str], backend: str | None = None,
                   **overrides: Any) -> Processor:
    """A processor for a built-in family name, a HuggingFace model folder or a hub id in the
    local Hugging Face cache (never downloaded here).

    ``backend``: the reference reproduced bit for bit. None: for a folder (or hub id), what
    transformers' ``AutoImageProcessor`` would resolve for it in an engine's environment:
    "torchvision" when its preprocessor_config.json names the torchvision class
    (``Qwen2VLImageProcessor``, ``...Fast``, ``Kimi_K25ImageProcessor``: what vLLM and SGLang
    run), "pil" when it names ``Qwen2VLImageProcessorPil``; for a family name the family's
    default: "pil" for Qwen, "upstream" (Kimi's own NumPy/PIL code) for Kimi-K2.5. torch is not
    needed either way. ``repr(processor)`` and one INFO log line say which and why. Overrides
    (e.g. ``min_pixels=..., max_pixels=..., max_image_pixels=...``) win over the folder's or
    family's values.
    """
    key = os.fspath(name_or_dir)
    why = "backend= given" if backend is not None else "the family's default"
    if key not in _FAMILIES and is_hub_id(key):
        key = hub_folder(key)
    if backend is None and key not in _FAMILIES and os.path.isdir(key):
        backend, why = folder_backend(key)
        why = why if backend is not None else f"{why} (the family's default)"
    if backend is not None:
        overrides = {**overrides, "backend": backend}
    proc = make_processor(resolve_config(key, overrides))
    proc.backend_reason = why
    logger.info("smg-fast: %s uses backend %r: %s", os.fspath(name_or_dir), proc.config.backend,
                why)
    return proc
