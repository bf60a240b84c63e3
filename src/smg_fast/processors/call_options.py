"""transformers' call-time image-processor options, turned into config overrides.

Also the per-image conversion settings, as transformers' image processors read them: the options
every family shares here, each family's own (its ``size``, its integer options) from its
``Family.calls``. An option that would change the output in a way smg-fast does not compute
raises an error that names it; options that change nothing here (``disable_grouping``,
``device="cpu"``, ...) are accepted. Values of a type transformers' classes refuse are refused
(processors/option_types.py), never converted. Nothing here imports transformers or torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedCallError
from .config import ProcessorConfig
from .option_types import (
    exact_flag,
    exact_float,
    exact_floats,
    exact_int,
    exact_size,
)
from .registry import get_family

CHANNELS_FIRST, CHANNELS_LAST = "channels_first", "channels_last"


@dataclass(frozen=True)
class CallOptions:
    """What one call asks beyond the processor's config."""

    overrides: tuple[tuple[str, Any], ...] = ()  # config fields, sorted (a cache key)
    do_rescale: bool = True
    do_convert_rgb: bool = True
    input_data_format: str | None = None  # None: inferred per image, as transformers does


def _enum_value(value: Any) -> Any:
    """transformers passes str enums (ChannelDimension, TensorType): their value."""
    return getattr(value, "value", value)


def _triple(name: str, value: Any) -> tuple[float, float, float]:
    vals = exact_floats(name, value)
    vals = vals * 3 if len(vals) == 1 and not isinstance(value, (list, tuple)) else vals
    if len(vals) != 3:
        raise ValueError(f"{name} must be one number or three, got {value!r}")
    if not all(math.isfinite(v) for v in vals):  # transformers computes NaNs with them
        raise UnsupportedCallError(f"{name} must be finite for smg-fast, got {value!r}")
    return vals[0], vals[1], vals[2]


def _size_keys(size: Any) -> dict[str, int]:
    """The ``size`` option as a plain dict of ints without None values.

    transformers may pass its SizeDict."""
    return exact_size("size", size)


def _no_effect_ok(value: Any, allowed: tuple[Any, ...]) -> bool:
    """Whether value is one of allowed, of the same type (1 is not True, "True" neither)."""
    if allowed == _NO_EFFECT["device"]:
        return str(value) == "cpu"  # a torch.device too
    return any(value is a or (type(value) is type(a) and value == a) for a in allowed)


def _field_value(cfg: ProcessorConfig, key: str, field: str, value: Any) -> Any:
    """A family's integer (or flag: crop_to_patches) option, of the type transformers takes."""
    flag = str(cfg.__dataclass_fields__[field].type).startswith("bool")
    return exact_flag(key, value) if flag else exact_int(key, value)


# Accepted when they change nothing: value -> allowed values.
_NO_EFFECT: dict[str, tuple[Any, ...]] = {
    "disable_grouping": (None, True, False), "device": (None, "cpu"),
    "data_format": (None, CHANNELS_FIRST), "do_resize": (None, True),
    "do_center_crop": (None, False), "do_pad": (None, False), "default_to_square": (None, False),
}


def parse_options(cfg: ProcessorConfig, options: dict[str, Any]) -> CallOptions:
    """CallOptions for a call's keyword arguments.

    TypeError names an unknown option, ValueError one this processor cannot honour."""
    # None means "the processor's own value" in transformers (its processors pass such keys)
    opts = {k: _enum_value(v) for k, v in options.items() if v is not None}
    fields: dict[str, Any] = {}
    rules = get_family(cfg.family).calls
    opts = rules.options(opts)  # the family's own (Idefics3's do_pad) before the shared rules
    for name, allowed in _NO_EFFECT.items():
        if name in opts and not _no_effect_ok(opts.pop(name), allowed):
            accepted = ", ".join(repr(a) for a in allowed if a is not None)
            raise UnsupportedCallError(f"{name}={options[name]!r} is not supported by smg-fast "
                                       f"(it accepts {accepted})")
    if opts.get("size") is not None:
        fields.update(rules.size(_size_keys(opts.pop("size"))))
    opts.pop("size", None)
    for key, field in rules.fields.items():
        if opts.get(key) is not None:
            fields[field] = _field_value(cfg, key, field, opts.pop(key))
        opts.pop(key, None)
    for key in ("image_mean", "image_std"):
        if opts.get(key) is not None:
            fields[key] = _triple(key, opts.pop(key))
        opts.pop(key, None)
    if opts.get("resample") is not None:  # a bool is an int there too (True: LANCZOS)
        fields["resample"] = int(exact_int("resample", opts.pop("resample"), bool_ok=True))
    opts.pop("resample", None)
    rescale = opts.pop("rescale_factor", None)
    do_rescale = opts.pop("do_rescale", None)
    do_normalize = opts.pop("do_normalize", None)
    do_convert_rgb = opts.pop("do_convert_rgb", None)
    fmt = opts.pop("input_data_format", None)
    for name, flag in (("do_rescale", do_rescale), ("do_normalize", do_normalize),
                       ("do_convert_rgb", do_convert_rgb)):
        if flag is not None:
            exact_flag(name, flag)
    if opts:
        raise UnsupportedCallError(f"unknown or unsupported option(s) {sorted(opts)} for "
                                   f"{cfg.family}")
    if fmt not in (None, CHANNELS_FIRST, CHANNELS_LAST):
        raise ValueError(f"input_data_format must be {CHANNELS_FIRST!r} or {CHANNELS_LAST!r}, "
                         f"got {options['input_data_format']!r}")
    if rescale is not None:
        fields["rescale_factor"] = exact_float("rescale_factor", rescale)
    if do_rescale is False:
        fields["rescale_factor"] = 1.0
    if do_normalize is not None:
        fields["do_normalize"] = bool(do_normalize)
    rules.check(cfg, fields)
    changed = tuple(sorted((k, v) for k, v in fields.items() if getattr(cfg, k) != v))
    return CallOptions(changed, do_rescale is not False, do_convert_rgb is not False, fmt)


__all__ = ["CHANNELS_FIRST", "CHANNELS_LAST", "CallOptions", "parse_options"]
