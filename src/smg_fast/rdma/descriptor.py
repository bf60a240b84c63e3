"""Compatibility path: ``smg_fast.rdma.descriptor`` is
:mod:`smg_fast.transport.rdma.descriptor`, the very same module object."""

import sys

from ..transport.rdma import descriptor as _module
from ..transport.rdma.descriptor import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
