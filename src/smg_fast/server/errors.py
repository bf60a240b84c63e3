"""The one exception the service turns into a gRPC status, and how a RESOURCE_EXHAUSTED answer
says whether trying again (here later, or on another replica) can help."""

from __future__ import annotations

import grpc

from ..errors import RETRYABLE_KEY  # (the trailer's name; this module's users import it here)


class RequestError(Exception):
    """A request that cannot be served: ``code`` and ``message`` go to the caller as is;
    ``retryable`` (RESOURCE_EXHAUSTED only) goes in the RETRYABLE_KEY trailing metadata."""

    def __init__(self, code: grpc.StatusCode, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable

    def trailers(self) -> tuple[tuple[str, str], ...]:
        return trailers(self.code, self.retryable)


def trailers(code: grpc.StatusCode, retryable: bool) -> tuple[tuple[str, str], ...]:
    """The trailing metadata of an answer with this code."""
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ()
    return ((RETRYABLE_KEY, "1" if retryable else "0"),)


class StoppedError(RequestError):
    """The request's own stop (cancelled, past its deadline, cut by the drain): never another
    request's answer, so a coalesced waiter that receives it computes for itself."""
