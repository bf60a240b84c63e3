"""Compatibility path: ``smg_fast.rdma.puller`` is :mod:`smg_fast.transport.rdma.puller`, the
very same module object."""

import sys

from ..transport.rdma import puller as _module
from ..transport.rdma.puller import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
