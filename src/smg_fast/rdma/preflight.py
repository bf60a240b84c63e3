"""Compatibility path: ``smg_fast.rdma.preflight`` is :mod:`smg_fast.transport.rdma.preflight`,
the very same module object; ``python -m smg_fast.rdma.preflight`` still runs the check."""

import sys

from ..transport.rdma import preflight as _module
from ..transport.rdma.preflight import *  # noqa: F403  (the names, for static tools)

if __name__ == "__main__":
    _module.main()
else:
    sys.modules[__name__] = _module
