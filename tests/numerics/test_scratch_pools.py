"""Scratch blocks go back to the pool of the thread that took them.

Whichever thread drops them. The process-wide cap on pooled bytes holds across threads."""

from __future__ import annotations

import queue
import threading

import pytest

pytest.importorskip("grpc")


import smg_fast  # noqa: E402
from smg_fast import _native  # noqa: E402

# ---- scratch pools ----


def test_scratch_blocks_return_to_the_thread_that_took_them():
    """A producer thread allocates, a consumer thread drops.

    The producer's pool gets the block back (hits), the consumer parks nothing, and the process
    total stays under its cap."""
    to_b: queue.Queue = queue.Queue()
    parked_in_b: queue.Queue = queue.Queue()

    def consumer() -> None:
        for _ in range(20):
            arr = to_b.get()
            del arr
            parked_in_b.put(smg_fast.scratch_stats()["thread_pooled_bytes"])

    def producer(result: dict) -> None:
        before = smg_fast.scratch_stats()
        for _ in range(20):
            to_b.put(_native.pooled_empty(24 << 20))
            result.setdefault("b", []).append(parked_in_b.get(timeout=30))
        after = smg_fast.scratch_stats()
        result["hits"] = after["hits"] - before["hits"]
        result["misses"] = after["misses"] - before["misses"]
        result["a_parked"] = after["thread_pooled_bytes"]
        result["total"] = after["pooled_bytes"]
        result["cap"] = after["total_cap_bytes"]
        _native.scratch_release()

    result: dict = {}
    b = threading.Thread(target=consumer)
    a = threading.Thread(target=producer, args=(result,))
    b.start()
    a.start()
    a.join(60)
    b.join(60)
    assert result["b"] == [0] * 20
    assert result["hits"] >= 19 and result["misses"] <= 1, result
    assert result["a_parked"] >= 24 << 20
    assert result["total"] <= result["cap"]


def test_scratch_process_cap_holds_across_threads():
    cap = smg_fast.scratch_stats()["total_cap_bytes"]
    _native.scratch_release()
    base = smg_fast.scratch_stats()["pooled_bytes"]  # other threads' pools (earlier tests)
    _native.scratch_set_total_cap(base + (40 << 20))
    try:
        seen = []

        def work() -> None:
            arrays = [_native.pooled_empty(16 << 20) for _ in range(3)]
            del arrays
            seen.append(smg_fast.scratch_stats()["pooled_bytes"])
            _native.scratch_release()

        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(seen) == 3 and max(seen) <= base + (40 << 20), (base, seen)
    finally:
        _native.scratch_set_total_cap(cap)
