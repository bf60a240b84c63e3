"""Compatibility path: ``smg_fast.shm_owner`` is :mod:`smg_fast.transport.shm_owner`, the very same
module object (its names, private ones included, and its state are shared, not copied)."""

import sys

from .transport import shm_owner as _module
from .transport.shm_owner import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
