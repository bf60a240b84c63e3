"""The one exception the service turns into a gRPC status."""

from __future__ import annotations

import grpc


class RequestError(Exception):
    """A request that cannot be served: ``code`` and ``message`` go to the caller as is."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class StoppedError(RequestError):
    """The request's own stop (cancelled, past its deadline, cut by the drain): never another
    request's answer, so a coalesced waiter that receives it computes for itself."""
