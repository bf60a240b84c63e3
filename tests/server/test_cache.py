"""Pixel cache: byte-budgeted LRU, no-copy hits and inserts, single flight, counters."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import numpy as np
import pytest

from smg_fast.server.cache import COALESCED, HIT, MISS, CacheEntry, PixelCache, cache_key


def entry(nbytes: int, fill: int = 0) -> CacheEntry:
    px = np.full(nbytes // 4, fill, dtype=np.float32).reshape(-1, 1)
    return CacheEntry(px, (1, 2, 2), 1)


def put(cache: PixelCache, key: str, e: CacheEntry) -> str:
    return cache.get_or_compute(key, lambda: e)[1]


def lookup(cache: PixelCache, key: str) -> bool:
    """A hit, or False (the miss computes nothing worth keeping: an empty entry)."""
    return cache.get_or_compute(key, lambda: entry(0))[1] == HIT


def test_lru_order_budget_and_counters():
    cache = PixelCache(1000)
    put(cache, "a", entry(400))
    put(cache, "b", entry(400))
    assert lookup(cache, "a")  # a becomes most recently used
    put(cache, "c", entry(400))  # evicts b (least recently used)
    assert "b" not in cache and "a" in cache and "c" in cache
    s = cache.stats()
    assert s["hits"] == 1 and s["misses"] == 3 and s["evictions"] == 1
    assert s["bytes"] == 800 and s["entries"] == 2 and s["capacity_bytes"] == 1000


def test_entry_larger_than_budget_is_returned_but_not_stored():
    cache = PixelCache(1000)
    put(cache, "small", entry(400))
    huge = entry(2000)
    got, how = cache.get_or_compute("huge", lambda: huge)
    assert how == MISS and got is huge
    assert "huge" not in cache and "small" in cache
    assert cache.stats()["rejected"] == 1 and cache.stats()["evictions"] == 0


def test_hits_and_inserts_do_not_copy():
    cache = PixelCache(1 << 20)
    e = entry(4096, 7)
    buf = e.pixels
    got, how = cache.get_or_compute("k", lambda: e)
    assert how == MISS and got.pixels is buf  # the computed buffer itself is kept
    again, how = cache.get_or_compute("k", lambda: pytest.fail("must not recompute"))
    assert how == HIT and again.pixels is buf and np.shares_memory(again.pixels, buf)
    assert not buf.flags.writeable  # stored buffers are immutable
    with pytest.raises(ValueError):
        again.pixels[0, 0] = 1


def run_coalesced(cache: PixelCache, worker, n: int, gate: threading.Event) -> None:
    """n threads run worker.

    Once n - 1 of them wait on the first one's computation, the gate lets that computation finish.
    """
    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    try:
        while cache.stats()["coalesced"] < n - 1:  # waits for the state, however slow the host
            assert time.monotonic() < deadline, cache.stats()
            time.sleep(0.005)
    finally:
        gate.set()
        for t in threads:
            t.join()


def test_single_flight_threads():
    cache = PixelCache(1 << 20)
    calls = []
    gate = threading.Event()

    def compute():
        calls.append(1)
        gate.wait(5)
        return entry(1024, 3)

    results = []

    def worker():
        results.append(cache.get_or_compute("key", compute))

    run_coalesced(cache, worker, 16, gate)
    assert len(calls) == 1
    hows = sorted(h for _, h in results)
    assert hows.count(MISS) == 1 and hows.count(COALESCED) == 15
    assert len({id(e.pixels) for e, _ in results}) == 1
    s = cache.stats()
    assert s["misses"] == 1 and s["coalesced"] == 15 and s["in_flight"] == 0


def test_single_flight_error_reaches_waiters_and_is_not_cached():
    cache = PixelCache(1 << 20)
    gate = threading.Event()

    def boom():
        gate.wait(5)
        raise ValueError("bad image")

    errors = []

    def worker():
        try:
            cache.get_or_compute("k", boom)
        except ValueError as exc:
            errors.append(str(exc))

    run_coalesced(cache, worker, 4, gate)
    assert errors == ["bad image"] * 4
    assert "k" not in cache
    got, how = cache.get_or_compute("k", lambda: entry(64))  # computed again afterwards
    assert how == MISS and got.nbytes == 64


def test_many_lookups_count_hits():
    cache = PixelCache(1 << 30)
    key = cache_key(b"\x01" * 32, "fingerprint", "float32")
    put(cache, key, entry(1 << 16))
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        cache.get_or_compute(key, lambda: pytest.fail("must hit"))
    per_call = (time.perf_counter() - t0) / n
    assert cache.stats()["hits"] == n
    print(f"lookup {per_call * 1e6:.2f} us")  # reported, not asserted (no timing asserts)


def test_negative_capacity_rejected():
    with pytest.raises(ValueError):
        PixelCache(-1)


class _Mine(Exception):
    """An error that belongs to the computing caller alone (its own cancellation, say)."""


def test_a_leaders_personal_error_is_not_handed_to_waiters():
    cache = PixelCache(1 << 20)
    entered, go = threading.Event(), threading.Event()

    def leader() -> CacheEntry:
        entered.set()
        go.wait(30)
        raise _Mine("the leader was cancelled")

    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        first = ex.submit(cache.get_or_compute, "k", leader, None, (_Mine,))
        assert entered.wait(30)
        second = ex.submit(cache.get_or_compute, "k", lambda: entry(64, 5), 30, (_Mine,))
        deadline = time.monotonic() + 30
        while cache.stats()["coalesced"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        go.set()
        with pytest.raises(_Mine):
            first.result(30)
        got, how = second.result(30)
    assert how == MISS and np.array_equal(got.pixels, entry(64, 5).pixels)
    assert cache.stats()["takeovers"] == 1 and "k" in cache
