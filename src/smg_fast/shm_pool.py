"""Deprecated path of :mod:`smg_fast.transport.shm_pool` (the same module object; warns once)."""

from ._deprecated import alias_module

alias_module(__name__, "smg_fast.transport.shm_pool")
