"""Receipt: what gRPC buffers for Preprocess calls whose message is still arriving.

gRPC keeps a call's message until all of it has arrived, and only then does admission see its
size: a client that sends most of a large message and stalls holds that memory, on as many
streams as HTTP/2 lets one connection open. So each Preprocess call is taken as soon as it
arrives (a stream handler, before its message) and read here: one connection may have at most
``per_connection`` calls whose message is still arriving (the next is refused RESOURCE_EXHAUSTED
unread, retryable), and a message must have arrived ``timeout_s`` after its call began (else the
call ends RESOURCE_EXHAUSTED and gRPC drops what it buffered). One connection then buffers at
most per_connection x the largest message, for at most timeout_s, and other connections are not
affected by it."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from .wire import trailers

_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
RECEIVING_PER_CONNECTION = 8  # defaults (the server's flags; the router's settings)
RECEIVE_TIMEOUT_S = 60.0


class Receipt:
    """Calls being received, per connection (``context.peer()``); used on the event loop only."""

    def __init__(self, per_connection: int, timeout_s: float) -> None:
        if per_connection < 1 or not timeout_s > 0:
            raise ValueError("need at least one call per connection and a timeout > 0")
        self.per_connection = per_connection
        self.timeout_s = timeout_s
        self._receiving: dict[str, int] = {}
        self.refused = 0
        self.timed_out = 0

    async def read(self, context: grpc.aio.ServicerContext) -> bytes:
        """The call's one request message, or the call aborted (refused, late, or empty)."""
        peer = context.peer()
        held = self._receiving.get(peer, 0)
        if held >= self.per_connection:
            self.refused += 1
            await _abort(context, f"this connection already has {held} request(s) whose message "
                                  f"is still arriving (--max-receiving-per-connection "
                                  f"{self.per_connection}): send them one after another, or "
                                  "over another connection")
        self._receiving[peer] = held + 1
        raw: Any = None
        try:
            raw = await asyncio.wait_for(context.read(), self.timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:  # (before any answer goes out)
            left = self._receiving.pop(peer) - 1
            if left:
                self._receiving[peer] = left
        if raw is None:
            self.timed_out += 1
            await _abort(context, f"the request message did not arrive within "
                                  f"{self.timeout_s:g} s (--receive-timeout-s): send it "
                                  "faster, or smaller")
        if raw is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return raw

    def stats(self) -> dict[str, int]:
        return {"receiving": sum(self._receiving.values()), "connections": len(self._receiving),
                "refused": self.refused, "timed_out": self.timed_out}


async def _abort(context: grpc.aio.ServicerContext, message: str) -> None:
    await context.abort(_EXHAUSTED, message, trailing_metadata=trailers(_EXHAUSTED, True))
