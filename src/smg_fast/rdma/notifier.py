"""Compatibility path: ``smg_fast.rdma.notifier`` is :mod:`smg_fast.transport.rdma.notifier`, the
very same module object."""

import sys

from ..transport.rdma import notifier as _module
from ..transport.rdma.notifier import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
