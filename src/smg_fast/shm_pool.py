"""Compatibility path: ``smg_fast.shm_pool`` is :mod:`smg_fast.transport.shm_pool`, the very same
module object (its names, private ones included, and its state are shared, not copied)."""

import sys

from .transport import shm_pool as _module
from .transport.shm_pool import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
