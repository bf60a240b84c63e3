"""The handler's word to the work of one request, which runs on a worker thread.

Stop (a code and a reason: cancelled, cut by the drain), and the RPC's deadline. The work checks it
between items."""

from __future__ import annotations

import time

import grpc

from .request_error import StoppedError


class Ticket:
    """The handler's word to the work.

    Stop (a code and a reason), and the RPC's deadline (on time.monotonic()). Plain attribute
    writes: safe to set from the event loop thread."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.code: grpc.StatusCode | None = None
        self.reason = ""
        self.fired = False  # the work stopped because of this ticket

    def stop(self, code: grpc.StatusCode, reason: str) -> None:
        """Asks the work to stop with code and reason (the first ask wins)."""
        if self.code is None:
            self.reason = reason
            self.code = code

    def remaining(self) -> float | None:
        """Seconds to the deadline (negative once passed); None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self) -> None:
        """Raises RequestError when the work must not go on."""
        code = self.code
        if code is not None:
            self.fired = True
            raise StoppedError(code, self.reason)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.fired = True
            raise StoppedError(grpc.StatusCode.DEADLINE_EXCEEDED,
                               "the request's deadline passed; its remaining work was skipped")
