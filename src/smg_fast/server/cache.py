"""Pixel cache: a byte-budgeted LRU of processed images with single-flight misses.

One entry per image, keyed by (content hash of the encoded bytes, processor config fingerprint,
output dtype). Entries hold the computed buffer itself (no copy on insert) made read-only, and a
hit hands out that same buffer (no copy on lookup). Entries are the server's private memory,
never a view of memory a consumer can write (see server/service.py). Concurrent misses for one
key compute once:
the first caller computes, the others wait for its result (or its exception), each for at most
its ``wait_s``: a stuck leader cannot pin the waiters, which then compute for themselves.
Thread-safe; a lookup is a dict access under a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import numpy as np

HIT = "hit"
MISS = "miss"
COALESCED = "coalesced"


@dataclass(frozen=True)
class CacheEntry:
    """One processed image or video: its pixel_values (read-only), grid and video metadata."""

    pixels: np.ndarray
    grid: tuple[int, int, int]
    num_tokens: int
    video: dict[str, Any] | None = None

    @property
    def nbytes(self) -> int:
        return int(self.pixels.nbytes)


def cache_key(content_hash: bytes, fingerprint: str, dtype: str) -> tuple[bytes, str, str]:
    return (bytes(content_hash), fingerprint, dtype)


class PixelCache:
    """LRU of CacheEntry under ``capacity_bytes``; entries larger than that are not stored."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError(f"capacity must be >= 0 bytes, got {capacity_bytes}")
        self.capacity_bytes = int(capacity_bytes)
        self._entries: OrderedDict[Hashable, CacheEntry] = OrderedDict()
        self._flights: dict[Hashable, Future] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.coalesced = 0
        self.evictions = 0
        self.inserts = 0
        self.rejected = 0  # larger than the whole budget
        self.takeovers = 0  # waiters that gave up on a slow leader and computed themselves

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # ---- single flight ----

    def get_or_compute(self, key: Hashable, compute: Callable[[], CacheEntry],
                       wait_s: float | None = None,
                       personal: tuple[type[BaseException], ...] = ()) -> tuple[CacheEntry, str]:
        """The cached entry, or compute() run once however many threads ask at the same time.

        Returns (entry, how) with how one of "hit", "miss" (this call computed) and "coalesced"
        (waited for another call's computation). An exception of compute() reaches every caller
        that waited for it; nothing is cached then. A waiter waits at most ``wait_s`` seconds
        (None: no bound); then it runs compute() itself (a "miss"; the leader's flight is left
        alone), so compute() should itself refuse work whose deadline has passed. A leader's
        exception of a ``personal`` type (its own cancellation, say) is not handed on: the
        waiter computes for itself instead.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry, HIT
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = Future()
                self._flights[key] = flight
                self.misses += 1
            else:
                self.coalesced += 1
        if not leader:
            try:
                return flight.result(wait_s), COALESCED
            except FutureTimeout:
                with self._lock:
                    self.takeovers += 1
            except personal:
                with self._lock:
                    self.takeovers += 1
            entry = compute()
            with self._lock:
                self._insert(key, entry)
            return entry, MISS
        try:
            entry = compute()
        except BaseException as exc:
            with self._lock:
                self._flights.pop(key, None)
            flight.set_exception(exc)
            raise
        with self._lock:
            self._flights.pop(key, None)
            self._insert(key, entry)
        flight.set_result(entry)
        return entry, MISS

    # ---- bookkeeping ----

    def _insert(self, key: Hashable, entry: CacheEntry) -> bool:
        size = entry.nbytes
        if size > self.capacity_bytes:
            self.rejected += 1
            return False
        if entry.pixels.flags.writeable:
            entry.pixels.flags.writeable = False
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes
        while self._entries and self._bytes + size > self.capacity_bytes:
            _, victim = self._entries.popitem(last=False)
            self._bytes -= victim.nbytes
            self.evictions += 1
        self._entries[key] = entry
        self._bytes += size
        self.inserts += 1
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "coalesced": self.coalesced,
                    "evictions": self.evictions, "inserts": self.inserts,
                    "rejected": self.rejected, "bytes": self._bytes,
                    "entries": len(self._entries), "capacity_bytes": self.capacity_bytes,
                    "in_flight": len(self._flights), "takeovers": self.takeovers}


__all__ = ["COALESCED", "HIT", "MISS", "CacheEntry", "PixelCache", "cache_key"]
