"""Refuses an extension built from another version of the package.

Such a build is stale: it computes with old kernels or misses new bindings. Imported by the package
before anything else that uses the extension, so the error is this one and not a missing
attribute."""

from __future__ import annotations

from . import _native
from ._version import __version__

if getattr(_native, "__version__", None) != __version__:
    raise ImportError(
        f"smg_fast._native was built for version {getattr(_native, '__version__', 'unknown')}, "
        f"but the Python package is {__version__}: rebuild it (pip install ., or python setup.py "
        "build_ext --inplace --force)")
