"""Deprecated path of :mod:`smg_fast.routing.routed_error` (the same module; warns once)."""

from typing import TYPE_CHECKING

from .._deprecated import alias_module

if TYPE_CHECKING:  # the names, for type checkers
    from .routed_error import *  # noqa: F403

alias_module(__name__, "smg_fast.routing.routed_error")
