"""Errors of the transport layer.

They sit at the bottom of it so that every other transport module (shm, tensors, rdma) can raise or
catch them without importing one another.

TensorError is the consumer's "this TensorData cannot be read" (a ValueError); the RDMA lane's
:class:`~smg_fast.transport.rdma.errors.DescriptorError` is one too.
"""

from __future__ import annotations


class TensorError(ValueError):
    """A TensorData that cannot be read (bad dtype, shape, size or shm handle)."""


class UntrustedSegmentError(TensorError):
    """An shm handle naming a file that is not an smg-fast segment of a trusted producer.

    The file has another name pattern, or another owner; it is neither mapped nor unlinked."""


class ShmNameError(ValueError):
    """A segment name that is not a plain file name."""


class ShmQuotaError(Exception):
    """A new segment would exceed the registry's cap on unread bytes or the caller's share of it.

    ``reason`` says which: "cap" or "share". Nothing was created."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


__all__ = ["ShmNameError", "ShmQuotaError", "TensorError", "UntrustedSegmentError"]
