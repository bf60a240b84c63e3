"""Compatibility path: ``smg_fast.tensors`` is :mod:`smg_fast.transport.tensors`, the very same
module object (its names, private ones included, and its state are shared, not copied)."""

import sys

from .transport import tensors as _module
from .transport.tensors import *  # noqa: F403  (the names, for static tools)

sys.modules[__name__] = _module
