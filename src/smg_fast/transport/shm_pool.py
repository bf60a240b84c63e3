"""Ready-made shm segments.

Created, space-reserved and mapped with their pages populated by a background thread, so a request
writes into mapped memory instead of paying tmpfs page allocation and page faults (~2 GB/s, the
dominant cost of a shm response) on its own path.

Segments come in size classes (the requested size rounded up to ``granule``); the pool keeps
``depth`` ready segments for the most recently requested classes that fit in ``budget_bytes``.
A taken segment is shrunk to the exact size. When no ready segment fits, the caller creates one
itself, exactly as without a pool. Refills happen only after ``quiet_s`` without a request
being taken and, when a ``busy`` callable is given (the server's "work in progress"), after
``quiet_s`` of not being busy: under saturation there is no idle time to move the work into, and
the pool stays out of the way.

Ready segments are unnamed (see :mod:`smg_fast.transport.shm_segment`): nothing outside this
process can reach them until the registry publishes one at delivery.

A class whose segment cannot be made (a small or full tmpfs: Docker's /dev/shm is 64 MB) is
retried after ``backoff_s``, doubling each time; after ``max_failures`` failures in a row the
pool gives that class up for good (logged once per pool); requests of that size make their own.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable

from .shm_owner import SHM_DIR
from .shm_segment import GRANULE, ShmSegment, create_segment

log = logging.getLogger("smg_fast.shm")

_POOLS: weakref.WeakSet[SegmentPool] = weakref.WeakSet()


def ready_segment_names() -> set[str]:
    """Names of the segments every live pool of this process holds ready (not handed out).

    Only where the filesystem lacks O_TMPFILE are ready segments named."""
    return {name for pool in list(_POOLS) for name in pool.ready_names()}


class SegmentPool:
    def __init__(self, budget_bytes: int, directory: str = SHM_DIR, *, depth: int = 2,
                 granule: int = GRANULE, quiet_s: float = 0.02, backoff_s: float = 1.0,
                 max_failures: int = 3) -> None:
        self.budget_bytes = int(budget_bytes)
        self.quiet_s = quiet_s
        self.busy: Callable[[], bool] | None = None
        self._last_take = 0.0
        self._idle_since: float | None = None
        self.directory = directory
        self.depth = depth
        self.granule = granule
        self._ready: dict[int, list[ShmSegment]] = {}
        self._demand: OrderedDict[int, float] = OrderedDict()  # size class -> last request
        self.backoff_s = backoff_s
        self.max_failures = max_failures
        self._failures: dict[int, int] = {}  # size class -> failures in a row
        self._retry_at: dict[int, float] = {}  # size class -> not before (monotonic)
        self._abandoned: set[int] = set()  # classes given up: never made again
        self._warned = False
        self.failed = 0
        self._bytes = 0  # ready segments + the one being made
        self._cond = threading.Condition()
        self._closed = False
        self.hits = 0
        self.misses = 0
        self.made = 0
        self._thread = threading.Thread(target=self._run, name="smg-fast-shm-pool", daemon=True)
        self._thread.start()
        _POOLS.add(self)

    def ready_names(self) -> list[str]:
        with self._cond:
            return [s.name for segs in self._ready.values() for s in segs if s.name]

    def size_class(self, nbytes: int) -> int:
        return -(-nbytes // self.granule) * self.granule

    def take(self, nbytes: int) -> ShmSegment | None:
        """A ready segment shrunk to nbytes, or None (the caller makes its own)."""
        cap = self.size_class(nbytes)
        if cap > self.budget_bytes:
            return None
        with self._cond:
            if self._closed:
                return None
            self._last_take = time.monotonic()
            if cap not in self._abandoned:
                self._demand[cap] = self._last_take
                self._demand.move_to_end(cap)
            ready = self._ready.get(cap)
            seg = ready.pop() if ready else None
            if seg is not None:
                self._bytes -= seg.nbytes
                self.hits += 1
            else:
                self.misses += 1
            self._cond.notify()
        if seg is None:
            return None
        try:
            seg.shrink(nbytes)
        except OSError:
            seg.discard()
            return None
        return seg

    def _wanted(self, now: float) -> tuple[int | None, float]:
        """Which class to make ready next, and how long a backing-off class still waits.

        The class is the most recently requested one short of ready segments that fits the budget
        and is not backing off; the wait is how long until a backing-off class may be tried. Lock
        held."""
        wait = 1.0
        for cap in reversed(self._demand):
            if len(self._ready.get(cap, ())) < self.depth:
                not_before = self._retry_at.get(cap, 0.0)
                if not_before > now:
                    wait = min(wait, not_before - now)
                    continue
                return (cap if self._bytes + cap <= self.budget_bytes else None), wait
        return None, wait

    def _failed(self, cap: int, exc: OSError) -> None:
        """Backs off a class that could not be made; gives it up after max_failures."""
        with self._cond:
            self._bytes -= cap
            self.failed += 1
            n = self._failures.get(cap, 0) + 1
            self._failures[cap] = n
            if n < self.max_failures:
                self._retry_at[cap] = time.monotonic() + self.backoff_s * 2 ** (n - 1)
                return
            self._abandoned.add(cap)
            self._demand.pop(cap, None)
            self._retry_at.pop(cap, None)
            warn = not self._warned
            self._warned = True
        (log.warning if warn else log.debug)(
            "shm pool: cannot pre-create %d-byte segments in %s (%s), %d tries; giving that "
            "size up (requests make their own segments)", cap, self.directory, exc, n)

    def _run(self) -> None:
        while True:
            with self._cond:
                cap = None
                while not self._closed:
                    now = time.monotonic()
                    if self.busy is not None and self.busy():
                        self._idle_since = None
                        self._cond.wait(self.quiet_s or 0.01)
                        continue
                    if self._idle_since is None:
                        self._idle_since = now
                    wait = max(self._last_take, self._idle_since) + self.quiet_s - now
                    if wait > 0:  # requests are arriving: do not compete with them
                        self._cond.wait(wait)
                        continue
                    cap, until = self._wanted(now)
                    if cap is not None:
                        break
                    self._cond.wait(until)
                    self._forget_old()
                if self._closed:
                    return
                self._bytes += cap
            try:
                seg = create_segment(cap, self.directory, populate=True, keep_fd=True)
            except OSError as exc:  # /dev/shm small or full: back off, requests make their own
                self._failed(cap, exc)
                continue
            with self._cond:
                self._failures.pop(cap, None)
                if self._closed:
                    self._bytes -= cap
                    seg.discard()
                    return
                self._ready.setdefault(cap, []).append(seg)
                self.made += 1

    def _forget_old(self, horizon_s: float = 60.0) -> None:
        """Classes nobody asked for in a while give their ready segments back (lock held)."""
        now = time.monotonic()
        for cap in [c for c, t in self._demand.items() if now - t > horizon_s]:
            del self._demand[cap]
            self._failures.pop(cap, None)
            self._retry_at.pop(cap, None)
            for seg in self._ready.pop(cap, []):
                self._bytes -= seg.nbytes
                seg.discard()

    def close(self) -> int:
        """Stops the refill thread and unlinks every ready segment; returns how many."""
        with self._cond:
            self._closed = True
            ready = [s for segs in self._ready.values() for s in segs]
            self._ready.clear()
            self._bytes = 0
            self._cond.notify_all()
        for seg in ready:
            seg.discard()
        self._thread.join(10)
        return len(ready)

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"hits": self.hits, "misses": self.misses, "made": self.made,
                    "failed": self.failed, "abandoned": len(self._abandoned),
                    "ready": sum(len(v) for v in self._ready.values()),
                    "ready_bytes": sum(s.nbytes for v in self._ready.values() for s in v),
                    "budget_bytes": self.budget_bytes}
