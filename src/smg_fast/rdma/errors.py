"""Compatibility path: ``smg_fast.rdma.errors`` is :mod:`smg_fast.transport.rdma.errors`, the
very same module object."""

import sys

from ..transport.rdma import errors as _module
from ..transport.rdma.errors import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
