"""Deprecated path of :mod:`smg_fast.transport.rdma.descriptor`: the same module, warns once."""

from .._deprecated import alias_module

alias_module(__name__, "smg_fast.transport.rdma.descriptor")
