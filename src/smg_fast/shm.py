"""Compatibility path: ``smg_fast.shm`` is :mod:`smg_fast.transport.shm`, the very same
module object (its names, private ones included, and its state are shared, not copied)."""

import sys

from .transport import shm as _module
from .transport.shm import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
