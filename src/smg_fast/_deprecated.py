"""Old module paths kept for a while.

Each warns once, names its new home and the release that removes it, and is the very same module
object as that home."""

from __future__ import annotations

import importlib
import sys
import warnings

# The release that drops the old flat paths (smg_fast.shm, smg_fast.tensors, smg_fast.rdma...).
REMOVED_IN = "0.2.0"


def _caller_stacklevel() -> int:
    """The stacklevel naming the user's import line, so filters keyed on their module apply.

    That is the first frame outside the shims and the import machinery (import_module
    included); warnings.warn itself steps over importlib's bootstrap frames without counting
    them."""
    frame = sys._getframe(1)  # alias_module or warn_package: stacklevel 1
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        module = frame.f_globals.get("__name__", "")
        ours = (name in (__file__, importlib.__file__) or module == "smg_fast.rdma"
                or module in OLD_PATHS)
        if not internal and not ours and level > 1:
            return level
        frame = frame.f_back
        if not internal:
            level += 1
    return 1


def alias_module(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated and make it the module ``new`` (same object, same state)."""
    warnings.warn(_message(old, new), DeprecationWarning, stacklevel=_caller_stacklevel())
    sys.modules[old] = importlib.import_module(new)


def _message(old: str, new: str) -> str:
    """The warning's text: the old path, its new home, the release that removes it."""
    facade = " (or the facade smg_fast.transport)" if new.startswith("smg_fast.transport") else ""
    return (f"{old} is deprecated and will be removed in smg-fast {REMOVED_IN}: import "
            f"{new}{facade} instead")


def warn_package(old: str, new: str) -> None:
    """Warn that the package ``old`` is deprecated (it re-exports ``new``'s names)."""
    warnings.warn(_message(old, new), DeprecationWarning, stacklevel=_caller_stacklevel())


# Old path -> new home (the shims below src/smg_fast read this; tests check every pair). The
# config and the routed error keep their old paths so that objects pickled by older releases load.
OLD_PATHS = {
    "smg_fast.config": "smg_fast.processors.config",
    "smg_fast.routing.errors": "smg_fast.routing.routed_error",
    "smg_fast.shm": "smg_fast.transport.shm",
    "smg_fast.shm_pool": "smg_fast.transport.shm_pool",
    "smg_fast.shm_owner": "smg_fast.transport.shm_owner",
    "smg_fast.tensors": "smg_fast.transport.tensors",
    **{f"smg_fast.rdma.{m}": f"smg_fast.transport.rdma.{m}"
       for m in ("descriptor", "errors", "exporter", "nixl", "notifier", "preflight", "puller")},
}
