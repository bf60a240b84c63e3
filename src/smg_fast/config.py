"""Deprecated path of :mod:`smg_fast.processors.config` (the same module object; warns once)."""

from typing import TYPE_CHECKING

from ._deprecated import alias_module

if TYPE_CHECKING:  # the names, for type checkers
    from .processors.config import *  # noqa: F403

alias_module(__name__, "smg_fast.processors.config")
