"""Compatibility path: ``smg_fast.rdma.nixl`` is :mod:`smg_fast.transport.rdma.nixl`, the
very same module object."""

import sys

from ..transport.rdma import nixl as _module
from ..transport.rdma.nixl import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
