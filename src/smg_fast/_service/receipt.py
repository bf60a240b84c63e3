"""Receipt: what gRPC buffers for Preprocess calls whose message is still arriving.

gRPC keeps a call's message until all of it has arrived, and only then does admission see its
size: a client that sends most of a large message and stalls holds that memory, on as many
streams as HTTP/2 lets one connection open. So each Preprocess call is taken as soon as it
arrives (a stream handler, before its message) and read here: one connection has at most
``per_connection`` calls reading their message at once; the next ones wait, in order, without
reading theirs (gRPC then takes no more of a message than its stream's HTTP/2 window), and a
message must have arrived ``timeout_s`` after its call began, wait included (else the call ends
RESOURCE_EXHAUSTED and gRPC drops what it buffered). One connection then buffers at most
per_connection x the largest message, plus a window per waiting call, for at most timeout_s, and
other connections are not affected by it."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import grpc

from .wire import trailers

_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
RECEIVING_PER_CONNECTION = 8  # defaults (the server's flags; the router's settings)
RECEIVE_TIMEOUT_S = 60.0


class _Connection:
    """One connection's calls: those receiving their message, and those waiting to (FIFO)."""

    def __init__(self) -> None:
        self.receiving = 0
        self.waiting: deque[asyncio.Future[None]] = deque()


class Receipt:
    """Calls being received, per connection (``context.peer()``); used on the event loop only."""

    def __init__(self, per_connection: int, timeout_s: float) -> None:
        if per_connection < 1 or not timeout_s > 0:
            raise ValueError("need at least one call per connection and a timeout > 0")
        self.per_connection = per_connection
        self.timeout_s = timeout_s
        self._conns: dict[str, _Connection] = {}
        self.queued = 0  # calls that waited for a place
        self.timed_out = 0

    async def read(self, context: grpc.aio.ServicerContext) -> bytes:
        """The call's one request message, or the call aborted (late, or empty)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.timeout_s
        peer = context.peer()
        conn = self._conns.get(peer) or self._conns.setdefault(peer, _Connection())
        if conn.receiving < self.per_connection and not conn.waiting:
            conn.receiving += 1
        elif not await self._wait(peer, conn):
            self.timed_out += 1
            await _abort(context, self._late())
        raw: Any = None
        try:
            raw = await asyncio.wait_for(context.read(), max(0.0, end - loop.time()))
        except asyncio.TimeoutError:
            pass
        finally:  # (before any answer goes out)
            self._release(peer, conn)
        if raw is None:
            self.timed_out += 1
            await _abort(context, self._late())
        if raw is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return raw

    async def _wait(self, peer: str, conn: _Connection) -> bool:
        """Waits for a place to receive (handed over by a call that ends); False at the timeout.

        Its message is not read meanwhile: HTTP/2 flow control keeps what the client may send
        of it to the stream's window."""
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.waiting.append(place)
        self.queued += 1
        try:
            await asyncio.wait_for(place, self.timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        except BaseException:  # cancelled: a place handed over meanwhile goes on
            if place.done() and not place.cancelled():
                self._release(peer, conn)
            raise
        finally:
            if place in conn.waiting:
                conn.waiting.remove(place)
            self._forget(peer, conn)

    def _release(self, peer: str, conn: _Connection) -> None:
        """A receiving call is done: its place goes to the first waiting call, if any."""
        while conn.waiting:
            nxt = conn.waiting.popleft()
            if not nxt.done():
                nxt.set_result(None)
                return
        conn.receiving -= 1
        self._forget(peer, conn)

    def _forget(self, peer: str, conn: _Connection) -> None:
        if not conn.receiving and not conn.waiting and self._conns.get(peer) is conn:
            del self._conns[peer]

    def _late(self) -> str:
        return (f"the request message did not arrive within {self.timeout_s:g} s "
                "(--receive-timeout-s): send it faster, or smaller")

    def stats(self) -> dict[str, int]:
        return {"receiving": sum(c.receiving for c in self._conns.values()),
                "waiting": sum(len(c.waiting) for c in self._conns.values()),
                "connections": len(self._conns), "queued": self.queued,
                "timed_out": self.timed_out}


async def _abort(context: grpc.aio.ServicerContext, message: str) -> None:
    await context.abort(_EXHAUSTED, message, trailing_metadata=trailers(_EXHAUSTED, True))
