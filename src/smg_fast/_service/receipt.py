"""Receipt: what gRPC buffers for Preprocess calls whose message is still arriving.

gRPC keeps a call's message until all of it has arrived, and only then does admission see its
size: a client that sends most of a large message and stalls holds that memory, on as many
streams as HTTP/2 lets one connection open, on as many connections as it opens. So each
Preprocess call is taken as soon as it arrives (a stream handler, before its message) and read
here: one connection has at most ``per_connection`` calls reading their message at once, and all
connections together at most ``total``; the next ones wait, in order, without reading theirs
(gRPC then takes no more of a message than its stream's HTTP/2 window), and a message must have
arrived ``timeout_s`` after its call began, wait included (else the call ends RESOURCE_EXHAUSTED
and gRPC drops what it buffered). The server then buffers at most total x the largest message,
plus a window per waiting call, for at most timeout_s; one connection at most per_connection of
those places, so it cannot take them all alone."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import grpc

from .wire import trailers

_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
RECEIVING_PER_CONNECTION = 8  # defaults (the server's flags; the router's settings)
RECEIVE_TIMEOUT_S = 60.0


def receiving_limit(max_receiving: int, per_connection: int, queued_bytes: int,
                    max_message_bytes: int) -> int:
    """Calls reading their message at once, all connections together.

    ``max_receiving``, or when 0 (auto) as many largest messages as the admission's bytes hold,
    at least ``per_connection``."""
    return max_receiving or max(per_connection, queued_bytes // max_message_bytes)


class _Places:
    """Calls that may receive at once, and those waiting for a place (FIFO)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.receiving = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    def idle(self) -> bool:
        return not self.receiving and not self.waiting

    async def take(self, timeout_s: float) -> bool:
        """A place to receive, at once or handed over by a call that ends; False at the timeout."""
        if self.receiving < self.size and not self.waiting:
            self.receiving += 1
            return True
        if timeout_s <= 0:
            return False
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(place)
        try:
            await asyncio.wait_for(place, timeout_s)
            return True
        except asyncio.TimeoutError:
            # a place handed over in the same loop turn as the timeout is still ours (3.12's
            # wait_for may time out with the future already done)
            return place.done() and not place.cancelled()
        except BaseException:  # cancelled: a place handed over meanwhile goes on
            if place.done() and not place.cancelled():
                self.give()
            raise
        finally:
            if place in self.waiting:
                self.waiting.remove(place)

    def give(self) -> None:
        """A receiving call is done: its place goes to the first waiting call, if any."""
        while self.waiting:
            nxt = self.waiting.popleft()
            if not nxt.done():
                nxt.set_result(None)
                return
        self.receiving -= 1


class Receipt:
    """Calls being received, per connection (``context.peer()``) and in all; on the event loop."""

    def __init__(self, per_connection: int, timeout_s: float, total: int = 0) -> None:
        if per_connection < 1 or not timeout_s > 0 or total < 0:
            raise ValueError("need at least one call per connection, a timeout > 0 and a "
                             "total >= 0")
        self.per_connection = per_connection
        self.timeout_s = timeout_s
        self.total = total or per_connection
        self._all = _Places(self.total)
        self._conns: dict[str, _Places] = {}
        self.queued = 0  # calls that waited for a place
        self.timed_out = 0

    async def read(self, context: grpc.aio.ServicerContext) -> bytes:
        """The call's one request message, or the call aborted (late, or empty)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.timeout_s
        peer = context.peer()
        conn = self._conns.get(peer) or self._conns.setdefault(peer, _Places(self.per_connection))
        if not await self._take(conn, end, peer):
            self.timed_out += 1
            await _abort(context, self._late())
        raw: Any = None
        try:
            raw = await asyncio.wait_for(context.read(), max(0.0, end - loop.time()))
        except asyncio.TimeoutError:
            pass
        finally:  # (before any answer goes out)
            self._all.give()
            conn.give()
            self._forget(peer, conn)
        if raw is None:
            self.timed_out += 1
            await _abort(context, self._late())
        if raw is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        return raw

    async def _take(self, conn: _Places, end: float, peer: str) -> bool:
        """A place on the call's connection, then one in all, before ``end``; False if late.

        The message is not read meanwhile: HTTP/2 flow control keeps what the client may send
        of it to the stream's window."""
        loop = asyncio.get_running_loop()
        if conn.waiting or conn.receiving >= conn.size or self._all.waiting \
                or self._all.receiving >= self._all.size:
            self.queued += 1
        try:
            if not await conn.take(end - loop.time()):
                return False
            try:
                if await self._all.take(end - loop.time()):
                    return True
            except BaseException:
                conn.give()
                raise
            conn.give()
            return False
        finally:
            self._forget(peer, conn)

    def _forget(self, peer: str, conn: _Places) -> None:
        if conn.idle() and self._conns.get(peer) is conn:
            del self._conns[peer]

    def _late(self) -> str:
        return (f"the request message did not arrive within {self.timeout_s:g} s "
                "(--receive-timeout-s): send it faster, or smaller")

    def stats(self) -> dict[str, int]:
        return {"receiving": self._all.receiving,
                "waiting": sum(len(c.waiting) for c in self._conns.values())
                + len(self._all.waiting),
                "connections": len(self._conns), "queued": self.queued,
                "timed_out": self.timed_out, "max_receiving": self.total}


async def _abort(context: grpc.aio.ServicerContext, message: str) -> None:
    await context.abort(_EXHAUSTED, message, trailing_metadata=trailers(_EXHAUSTED, True))
