"""Deprecated path of :mod:`smg_fast.transport.rdma`.

Re-exports its public names (the same objects) and warns once; each old submodule path is the very
same module object as the new one."""

from .._deprecated import warn_package
from ..transport.rdma import *  # noqa: F403
from ..transport.rdma import __all__  # noqa: F401

warn_package(__name__, "smg_fast.transport.rdma")
del warn_package
