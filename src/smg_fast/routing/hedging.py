"""Hedged sub-calls: a second try on another member for a sub-call that runs long.

A sub-call that runs past a high percentile (``percentile``, default 95) of its member's recent
latencies for the same model and size class (its number of items: 1, 2-3, 4-7, 8+) is sent
again to the next member in its first item's rendezvous order; the first answer wins and the
other is cancelled (an answer that comes anyway is released). A member's recent latencies are its
last ``WINDOW`` successful sub-calls of that class; with fewer than ``MIN_SAMPLES`` the fleet's
(every member's) are used, and with fewer of those nothing is hedged yet.

Hedges are budgeted: each sub-call adds ``ratio`` (default 0.05) of a hedge to a bucket of at most
``BURST`` hedges, and each hedge takes one, so hedges stay near 5 % of the sub-calls and cannot
double the load. A member whose sub-calls' hedges win ``SUSPECT_AFTER`` times in a row (its own
calls keep losing to another member's) is suspected: it takes no new work until a health Check
answers SERVING within ``PROBE_S``; no answer, or another status, ejects it (health.Ejection).
The hedges of calls on a member already suspected or ejected come out of no budget: it is
believed not to be working. A member's latencies and streak go when it leaves the fleet.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import time
from collections import deque

import grpc
from grpc_health.v1 import health_pb2

from .health import Ejection
from .member import Member

log = logging.getLogger("smg_fast.routing")

WINDOW = 128  # recent successful sub-calls per (member, model, size class)
MIN_SAMPLES = 16
BURST = 10.0  # hedges that may go at once after a calm spell
SUSPECT_AFTER = 3  # hedges in a row that beat a member's own calls
PROBE_S = 1.0  # how long a suspected member's health Check may take
_SERVING = health_pb2.HealthCheckResponse.SERVING


def size_class(items: int) -> int:
    """1, 2-3, 4-7, 8+ items: 0, 1, 2, 3."""
    return min(3, max(0, items.bit_length() - 1))


class _Window:
    """The last WINDOW latencies, with their sorted copy for percentiles."""

    def __init__(self) -> None:
        self.order: deque[float] = deque()
        self.sorted: list[float] = []

    def add(self, seconds: float) -> None:
        if len(self.order) == WINDOW:
            old = self.order.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        self.order.append(seconds)
        bisect.insort(self.sorted, seconds)

    def percentile(self, p: float) -> float | None:
        n = len(self.sorted)
        if n < MIN_SAMPLES:
            return None
        return self.sorted[min(n - 1, math.ceil(p / 100.0 * n) - 1)]


class Hedging:
    """Latencies, the budget and suspicion of one fleet (``percentile`` 0: never hedge)."""

    def __init__(self, ejection: Ejection, percentile: float = 95.0, ratio: float = 0.05) -> None:
        if not (percentile == 0 or 50 <= percentile < 100):
            raise ValueError(f"hedge_percentile must be 0 (off) or 50..<100, got {percentile!r}")
        if not 0 <= ratio <= 1:
            raise ValueError(f"hedge_ratio must be 0..1, got {ratio!r}")
        self.ejection = ejection
        self.percentile = percentile
        self.ratio = ratio
        self.tokens = BURST
        self._mine: dict[tuple[str, str, int], _Window] = {}
        self._all: dict[tuple[str, int], _Window] = {}
        self.counts = {"sent": 0, "won": 0, "lost": 0, "refused": 0, "suspected": 0}
        self._streak: dict[str, int] = {}
        self._probes: set[asyncio.Task] = set()

    def started(self) -> None:
        """One sub-call started: the budget grows by ratio."""
        self.tokens = min(BURST, self.tokens + self.ratio)

    def record(self, m: Member, model: str, items: int, seconds: float) -> None:
        """A sub-call of m succeeded in seconds (not kept for a member already removed)."""
        if m.removed:
            return
        c = size_class(items)
        self._mine.setdefault((m.target, model, c), _Window()).add(seconds)
        self._all.setdefault((model, c), _Window()).add(seconds)

    def forget(self, m: Member) -> None:
        """m left the fleet: its latencies and its streak go (members come and go without end)."""
        for key in [k for k in self._mine if k[0] == m.target]:
            del self._mine[key]
        self._streak.pop(m.target, None)

    def tracked(self) -> set[str]:
        """The members whose latencies or streak are kept."""
        return {k[0] for k in self._mine} | set(self._streak)

    def delay(self, m: Member, model: str, items: int) -> float | None:
        """How long a sub-call on m may run before it is hedged (None: not hedged)."""
        if not self.percentile:
            return None
        c = size_class(items)
        for w in (self._mine.get((m.target, model, c)), self._all.get((model, c))):
            if w is not None and (d := w.percentile(self.percentile)) is not None:
                return d
        return None

    def allow(self, m: Member) -> bool:
        """Whether a hedge of a call on m may go now (it takes a budget token, if one is due)."""
        if m.suspected or time.monotonic() < m.ejected_until:
            return True
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.counts["refused"] += 1
        return False

    def settled(self, original: Member, hedge_won: bool) -> None:
        """A hedged pair ended: who won says something of the original's member."""
        self.counts["won" if hedge_won else "lost"] += 1
        if original.removed:
            return
        if not hedge_won:
            self._streak[original.target] = 0
            return
        streak = self._streak.get(original.target, 0) + 1
        self._streak[original.target] = streak
        if streak >= SUSPECT_AFTER and not original.suspected:
            self._streak[original.target] = 0
            self.suspect(original)

    def suspect(self, m: Member) -> None:
        """m takes no new work until a health Check answers; no answer ejects it."""
        m.suspected = True
        self.counts["suspected"] += 1
        log.warning("member %s: its hedges keep winning; suspected, probing its health", m.target)
        task = asyncio.get_running_loop().create_task(self._probe(m))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _probe(self, m: Member) -> None:
        """m's health Check: SERVING clears the suspicion; silence or another status ejects."""
        epoch = m.epoch
        try:
            if m.health is not None:
                resp = await m.health.Check(health_pb2.HealthCheckRequest(service=""),
                                            timeout=PROBE_S)
                if resp.status != _SERVING:
                    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
                    log.warning("member %s: the health probe answered %s: ejected", m.target,
                                status)
                    self.ejection.eject(m, epoch)
                    return
            log.info("member %s: answered the health probe; no longer suspected", m.target)
        except grpc.aio.AioRpcError as exc:
            log.warning("member %s: no answer to the health probe (%s): ejected", m.target,
                        exc.code().name)
            self.ejection.eject(m, epoch)
        finally:
            m.suspected = False

    def close(self) -> None:
        for t in list(self._probes):
            t.cancel()
