"""Compatibility path: the RDMA lane lives in :mod:`smg_fast.transport.rdma`. This package
re-exports its public names (the same objects), and each old submodule path
(``smg_fast.rdma.puller`` ...) is the very same module object as the new one."""

from ..transport.rdma import *  # noqa: F403
from ..transport.rdma import __all__  # noqa: F401
