"""The RDMA pixel transport over NIXL.

Server side: :class:`Exporter` (a registered native slot arena, see ``csrc/slot_arena.hpp``).
Worker side: :class:`Puller`, which READs a RemoteTensorHandle's slot into its own registered
landing pool and frees the exporter's slot with a NIXL notification. NIXL is optional: install it
with ``pip install --no-deps nixl-cu12==1.5.1`` (or the ``rdma`` extra after a CPU torch).
"""

from __future__ import annotations

import threading

from .descriptor import TRANSPORT, Descriptor
from .errors import (
    DescriptorError,
    ExportRefused,
    ForeignHandleError,
    PullError,
    RdmaError,
    RdmaUnavailable,
    StaleSlotError,
)
from .exporter import DEFAULT_PORT, DEFAULT_SLOT_BYTES, DEFAULT_SLOTS, Exporter, ExportLease
from .puller import DEFAULT_TIMEOUT_S, Puller

# A slot is reaped this long after it was written if no puller confirmed it: three times the
# puller's default pull deadline (which covers its metadata refresh and retry).
DEFAULT_SLOT_TTL_S = 3 * DEFAULT_TIMEOUT_S

_default: Puller | None = None
_default_lock = threading.Lock()


def set_default_puller(puller: Puller | None) -> None:
    """The puller :func:`smg_fast.transport.tensors.read_tensor` uses for remote payloads."""
    global _default
    with _default_lock:
        _default = puller


def default_puller() -> Puller:
    """The configured default puller, created with default settings on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Puller()
        return _default


__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_SLOTS",
    "DEFAULT_SLOT_BYTES",
    "DEFAULT_SLOT_TTL_S",
    "DEFAULT_TIMEOUT_S",
    "TRANSPORT",
    "Descriptor",
    "DescriptorError",
    "ExportLease",
    "ExportRefused",
    "Exporter",
    "ForeignHandleError",
    "PullError",
    "Puller",
    "RdmaError",
    "RdmaUnavailable",
    "StaleSlotError",
    "default_puller",
    "set_default_puller",
]
