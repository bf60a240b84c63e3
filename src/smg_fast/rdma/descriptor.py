"""Deprecated path of :mod:`smg_fast.transport.rdma.descriptor`: the same module, warns once."""

from typing import TYPE_CHECKING

from .._deprecated import alias_module

if TYPE_CHECKING:  # the names, for type checkers
    from ..transport.rdma.descriptor import *  # noqa: F403

alias_module(__name__, "smg_fast.transport.rdma.descriptor")
