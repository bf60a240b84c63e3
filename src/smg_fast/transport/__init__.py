"""How tensors leave the process.

TensorData encoding and reading, /dev/shm segments, and the RDMA lane over NIXL.

Dependencies point one way (tests/package/test_layout.py keeps it so), bottom first:

- ``errors``: TensorError and the shm errors; ``dtypes``: TensorData dtype names.
- ``background``: slow releases off the request path.
- ``shm_owner``: segment names, producer liveness (lock files), the sweeper of dead producers.
- ``shm_segment``: one segment (create, publish, close); ``shm_pool``: ready-made segments.
- ``shm``: the registry of owned segments, and the public shm names in one place.
- ``rdma``: exporter and puller (uses errors and dtypes, never shm or tensors).
- ``encoding``: TensorData's encodings: the compact "uint8+lut" table read and stamped.
- ``tensors``: TensorData encode / :func:`~smg_fast.transport.tensors.read_tensor` (shm, and
  rdma lazily for remote payloads, so NIXL is imported only when a remote tensor is read).

Nothing here imports ``smg_fast.server`` or ``smg_fast.processors``. The old flat paths
(``smg_fast.shm``, ``smg_fast.tensors``, ``smg_fast.rdma``...) are deprecated aliases
(``smg_fast._deprecated``).

This package is also the facade an encode worker imports (each name's module loads on first
use, so NIXL is touched only by a pull)::

    from smg_fast.transport import Puller, read_tensor, shm_namespace
    x = read_tensor(item.pixel_values)                  # inline bytes or an shm handle
    x = read_tensor(item.pixel_values, puller=Puller())  # an rdma handle too
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the facade's names, for type checkers (loaded lazily at run time)
    from .errors import ShmNameError, TensorError, UntrustedSegmentError
    from .rdma import (
        Puller,
        PullError,
        RdmaError,
        RdmaUnavailable,
        default_puller,
        set_default_puller,
    )
    from .shm_owner import SHM_DIR, shm_namespace
    from .tensors import read_tensor, to_tensor_data

# Public name -> the module that defines it.
_FACADE = {
    "read_tensor": "tensors",
    "to_tensor_data": "tensors",
    "TensorError": "errors",
    "UntrustedSegmentError": "errors",
    "ShmNameError": "errors",
    "shm_namespace": "shm_owner",
    "SHM_DIR": "shm_owner",
    "Puller": "rdma",
    "PullError": "rdma",
    "RdmaError": "rdma",
    "RdmaUnavailable": "rdma",
    "set_default_puller": "rdma",
    "default_puller": "rdma",
}

__all__ = [
    "SHM_DIR",
    "PullError",
    "Puller",
    "RdmaError",
    "RdmaUnavailable",
    "ShmNameError",
    "TensorError",
    "UntrustedSegmentError",
    "default_puller",
    "read_tensor",
    "set_default_puller",
    "shm_namespace",
    "to_tensor_data",
]


def __getattr__(name: str) -> Any:
    """Loads a facade name's module on first use (PEP 562)."""
    if name not in _FACADE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FACADE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
