"""The sub-calls of routed requests.

One Preprocess per member with its items of one request, under the request's deadline (or a shorter
attempt timeout of its own). Each ends as an answer, or as a failure the fleet may retry elsewhere,
and says what it tells of the member (health.Ejection counts transport failures; a timeout alone is
only a question to the member). Sub-calls nobody waits for any more are cancelled and held until
they end; what they answer anyway is released.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import grpc

from .._service.wire import says_retryable
from .forwarded_caller import caller_metadata
from .health import Ejection
from .member import Member
from .messages import release
from .routed_request import RoutedRequest

_C = grpc.StatusCode
CHECK_MIN_S = 1.0  # the shortest health Check that confirms a member whose sub-call timed out


def _count(m: Member, outcome: str, n: int) -> None:
    """Counts n items of m by how their sub-call ended."""
    m.items[outcome] = m.items.get(outcome, 0) + n


class SubCalls:
    """A fleet's sub-calls: sends them, classifies how they ended, and holds the abandoned ones.

    ``attempt_timeout``: the longest one sub-call may take (None: the request's deadline);
    ``counts``: the fleet's counters (late answers, segments released)."""

    def __init__(self, ejection: Ejection, counts: Counter[str],
                 attempt_timeout: float | None = None) -> None:
        self.ejection = ejection
        self.counts = counts
        self.attempt_timeout = attempt_timeout
        self._abandoned: set[asyncio.Future] = set()  # cancelled, still ending

    def discard(self, resp: Any) -> None:
        """Unlinks the shm segments of an answer nobody will read.

        Its request failed, or its caller left. Only for a caller in our shm namespace. finish may
        have read some already (read_response unlinks as it maps): those are gone, and not
        counted."""
        self.counts["unread_released"] += release(resp)

    def keep(self, fut: asyncio.Future) -> None:
        """Holds an abandoned future until it ends (close() waits for it)."""
        self._abandoned.add(fut)
        fut.add_done_callback(self._abandoned.discard)

    async def call(self, r: RoutedRequest, m: Member, epoch: int, probe: bool,
                   idx: list[int]) -> tuple[str, Any]:
        """r's sub-call of items idx on m.

        ("ok", (response, values)) or ("error", (code, details, retry)).

        The member's in-flight count covers the RPC until it really ends. A probe (half-open)
        that ends without a verdict (cancelled) lets the next request probe."""
        sub = r.sub_request(idx)
        local = r.local
        loop = asyncio.get_running_loop()
        left = r.time_left(loop.time())
        if left == 0:  # (it passed since _place): sent with no time, it would be charged to m
            m.in_flight -= r.weight(idx)
            m.probing = m.probing and not probe
            m.freed.set()
            m.freed = asyncio.Event()
            return "error", (_C.DEADLINE_EXCEEDED, "the request's deadline passed before it "
                                                   "was sent to a member", False)
        limit = left
        if self.attempt_timeout is not None and (left is None or self.attempt_timeout < left):
            limit = self.attempt_timeout  # a deadline of its own: hitting it is the member's
        try:  # (the in-flight count was taken by _place; released when the RPC really ends)
            call = m.stub.Preprocess(sub, timeout=limit, **caller_metadata())
            rpc = asyncio.ensure_future(call)
        except BaseException:
            m.in_flight -= r.weight(idx)
            if probe:
                m.probing = False
            raise

        def ended(_: asyncio.Future) -> None:
            m.in_flight -= r.weight(idx)
            m.freed.set()  # wakes the requests whose images wait for m
            m.freed = asyncio.Event()

        def abandon() -> None:  # nobody will use this answer
            rpc.add_done_callback(lambda f: self._release_late(f, local))
            call.cancel()
            self.keep(rpc)

        rpc.add_done_callback(ended)
        lost = asyncio.ensure_future(m.lost.wait())
        try:
            await asyncio.wait({rpc, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            abandon()
            if probe:  # else the member would never be placed on again
                m.probing = False
            _count(m, "cancelled", len(idx))
            raise
        finally:
            lost.cancel()
        if not rpc.done():  # the member went away: its answer, if any, is not ours any more
            abandon()
            self.ejection.failure(m, epoch)
            _count(m, "abandoned", len(idx))
            return "error", (_C.UNAVAILABLE, f"{m.target} stopped serving", True)
        if rpc.cancelled():  # (the channel was closed under it: remove())
            if probe:
                m.probing = False
            _count(m, "abandoned", len(idx))
            return "error", (_C.UNAVAILABLE, f"{m.target} was removed", True)
        exc = rpc.exception()
        if isinstance(exc, grpc.aio.AioRpcError):
            code = exc.code()
            own = limit is not None and limit != left  # the sub-call's deadline, not the caller's
            if code in (_C.UNAVAILABLE, _C.CANCELLED):
                self.ejection.failure(m, epoch)  # a peer that died or left
                retry = True
            elif code == _C.DEADLINE_EXCEEDED and own:  # slow work, or a hung peer: ask it
                if probe:  # its verdict is the health Check's
                    m.probing = False
                self.keep(loop.create_task(self.ejection.verify(
                    m, epoch, max(CHECK_MIN_S, limit or 0.0))))
                retry = True
            elif code == _C.DEADLINE_EXCEEDED:  # the caller's time ran out: says nothing of m
                if probe:  # its verdict is still to come: the next request probes
                    m.probing = False
                retry = False
            else:  # the member answered: it is alive
                self.ejection.success(m)
                retry = code == _C.RESOURCE_EXHAUSTED and says_retryable(exc)
            _count(m, code.name.lower(), len(idx))
            return "error", (code, exc.details() or "", retry)
        resp = rpc.result()
        self.ejection.success(m)
        if len(resp.items) != len(idx):
            if local:
                self.discard(resp)
            _count(m, "internal", len(idx))
            return "error", (_C.INTERNAL, f"{m.target} answered {len(resp.items)} items for "
                                          f"{len(idx)}", False)
        try:
            values = await r.finish(m, resp)
        except BaseException as exc:  # (the answer could not be read, or the caller left)
            if local:
                self.discard(resp)  # what finish had not reached yet
            cancelled = isinstance(exc, asyncio.CancelledError)
            _count(m, "cancelled" if cancelled else "unread", len(idx))
            raise
        _count(m, "ok", len(idx))
        return "ok", (resp, values)

    def _release_late(self, rpc: asyncio.Future, local: bool) -> None:
        """An abandoned sub-call ended.

        An answer that came anyway is counted and, when its segments are in our /dev/shm, unlinked.
        """
        if not rpc.cancelled() and rpc.exception() is None:
            self.counts["late_responses"] += 1
            if local:
                self.counts["late_released"] += release(rpc.result())

    async def close(self) -> None:
        """Cancels the sub-calls abandoned before and waits (a little) for them to end."""
        rest = list(self._abandoned)
        for fut in rest:
            fut.cancel()
        if rest:
            await asyncio.wait(rest, timeout=5.0)
