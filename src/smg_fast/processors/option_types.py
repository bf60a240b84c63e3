"""transformers' type rules for call options, checked before any value is used.

transformers 5 checks each call's keyword arguments against its class's TypedDict (huggingface_hub's
strict validation) before computing: an ``int`` option takes a Python int and refuses bool, float,
str and NumPy scalars; a ``bool`` option takes a bool only (1, "True", numpy.bool_ refused); a
``float`` option a float (an int refused); a size a dict of ints. ``resample`` is not checked
there, but the PIL classes' resize reads anything but an int (a bool is one) as BILINEAR, so
other types are refused too. smg-fast refuses the same values with UnsupportedCallError instead
of converting them: a converted value (``max_pixels=1000000.7`` read as 1000000) computes what
transformers' class never does. smg_fast.hf hands such calls to transformers' class, which
raises its own error (or computes its own way)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import UnsupportedCallError


def _refuse(name: str, kind: str, value: Any) -> UnsupportedCallError:
    return UnsupportedCallError(f"{name} must be {kind}, got {type(value).__name__} {value!r} "
                                f"(transformers' classes refuse it)")


def exact_int(name: str, value: Any, bool_ok: bool = False) -> int:
    """value when it is an int (a bool only where bool_ok); UnsupportedCallError otherwise."""
    if not isinstance(value, int) or (isinstance(value, bool) and not bool_ok):
        raise _refuse(name, "an int", value)
    return int(value)


def exact_flag(name: str, value: Any) -> bool:
    """value when it is a bool; UnsupportedCallError otherwise."""
    if not isinstance(value, bool):
        raise _refuse(name, "a bool", value)
    return value


def exact_float(name: str, value: Any) -> float:
    """value when it is a float (an int is refused, as transformers refuses it)."""
    if not isinstance(value, float):
        raise _refuse(name, "a float", value)
    return float(value)


def exact_floats(name: str, value: Any) -> list[float]:
    """A float, or a list / tuple of floats, as a list; UnsupportedCallError otherwise."""
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, float) for v in value):
            raise _refuse(name, "a float or a list of floats", value)
        return [float(v) for v in value]
    return [exact_float(name, value)]


def size_items(name: str, size: Any) -> dict[Any, Any]:
    """A size option's items: a mapping's, or transformers' SizeDict's (a dataclass).

    UnsupportedCallError for anything else (an int, a pair, a list of pairs, a NumPy array), which
    dict() would take or raise a TypeError for; transformers' class converts some of these and
    refuses the rest, and smg_fast.hf hands them to it."""
    if isinstance(size, Mapping):
        return dict(size)
    if dataclasses.is_dataclass(size) and not isinstance(size, type):
        return dict(vars(size))
    raise _refuse(name, "a dict of ints", size)


def exact_size(name: str, size: Any) -> dict[str, int]:
    """A size dict's values (None values dropped) when each is an int; else UnsupportedCallError."""
    items = size_items(name, size)
    out = {k: v for k, v in items.items() if v is not None}
    for key, value in out.items():
        if not isinstance(key, str) or not isinstance(value, int) or isinstance(value, bool):
            raise _refuse(name, "a dict of ints", items)
    return {k: int(v) for k, v in out.items()}


__all__ = ["exact_flag", "exact_float", "exact_floats", "exact_int", "exact_size", "size_items"]
