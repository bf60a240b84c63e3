"""The one exception the service turns into a gRPC status.

A RESOURCE_EXHAUSTED one says whether trying again (here later, or on another replica) can help."""

from __future__ import annotations

import grpc

from .._service.wire import trailers


class RequestError(Exception):
    """A request that cannot be served: ``code`` and ``message`` go to the caller as is.

    ``retryable`` (RESOURCE_EXHAUSTED only) goes in the RETRYABLE_KEY trailing metadata."""

    def __init__(self, code: grpc.StatusCode, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable

    def trailers(self) -> tuple[tuple[str, str], ...]:
        """The answer's trailing metadata (RETRYABLE_KEY on RESOURCE_EXHAUSTED)."""
        return trailers(self.code, self.retryable)


class StoppedError(RequestError):
    """The request's own stop (cancelled, past its deadline, cut by the drain).

    Never another request's answer, so a coalesced waiter that receives it computes for itself."""


class DecodeBusyError(RequestError):
    """No room in the decode memory budget for this request's item within its wait.

    The computing request's own refusal: a coalesced waiter that receives it tries for itself."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, message, retryable=True)
