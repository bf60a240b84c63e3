"""Errors of the RDMA lane."""

from __future__ import annotations

from ..errors import TensorError


class RdmaError(RuntimeError):
    """Base of every RDMA-lane error."""


class RdmaUnavailable(RdmaError):
    """NIXL cannot be used here; ``reason`` is the fallback counter's label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ExportRefused(RdmaError):
    """The arena cannot take this tensor now (``reason``: "arena_full" or "too_large")."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


class DescriptorError(RdmaError, TensorError):
    """A RemoteTensorHandle (or its descriptor) that cannot be read.

    It is malformed, of an unknown version, or does not match its TensorData's shape and dtype. A
    TensorError, hence a ValueError."""


class ForeignHandleError(DescriptorError):
    """A RemoteTensorHandle of another transport (``transport`` names it).

    Such as smg's own "nixl" descriptors: not an smg-fast handle, refused before its descriptor is
    parsed."""

    def __init__(self, transport: str, expected: str) -> None:
        super().__init__(f"remote transport {transport!r} is not smg-fast's ({expected!r}): "
                         "this handle was made by another producer")
        self.transport = transport


class PullError(RdmaError):
    """A READ that did not deliver: peer unreachable, transfer error, or timeout."""


class StaleSlotError(PullError):
    """The slot no longer holds the handle's tensor (reaped and reused, or its exporter restarted).

    Nothing was returned; ask the server again."""
