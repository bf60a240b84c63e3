"""Compatibility path: ``smg_fast.rdma.exporter`` is :mod:`smg_fast.transport.rdma.exporter`, the
very same module object."""

import sys

from ..transport.rdma import exporter as _module
from ..transport.rdma.exporter import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
