"""Per-caller shares of the RDMA slot arena: no caller holds more than its slots at once.

A caller that never pulls holds its slots until the TTL reaps them; without a share it could take
the whole arena and every other caller's items would fall back. The exporter asks ``take`` before
a lease (a place is reserved at once, so concurrent leases of one caller cannot pass the share),
then ``bind``s the lease's key to the caller, or ``untake``s when the arena refused. A place is
given back when its slot is: freed by key (the puller's notification, the producer), aborted, or
reaped. The arena does not say which leases it reaped, so a committed lease counts until a reap
pass that began at least the TTL after its commit (noted after the arena's own commit, so never
before the arena reaps it): a share is never undercounted, and overcounted by one reap interval
at most."""

from __future__ import annotations

import threading
import time


class CallerShares:
    """Slots each caller holds; one lock, safe from worker threads and the exporter's thread."""

    def __init__(self, per_caller: int, ttl_s: float) -> None:
        if per_caller < 1:
            raise ValueError("a caller's share must be at least one slot")
        self.per_caller = per_caller
        self.ttl_s = ttl_s
        self.refused = 0
        self._held: dict[str, int] = {}  # caller -> places taken
        self._keys: dict[str, tuple[str, float | None]] = {}  # key -> (caller, commit time)
        self._lock = threading.Lock()

    def take(self, caller: str) -> bool:
        """Reserves a place for caller, or counts a refusal (its share is full)."""
        with self._lock:
            n = self._held.get(caller, 0)
            if n >= self.per_caller:
                self.refused += 1
                return False
            self._held[caller] = n + 1
            return True

    def untake(self, caller: str) -> None:
        """Gives back a place take() reserved whose lease did not happen."""
        with self._lock:
            self._drop(caller)

    def bind(self, key: str, caller: str, committed: bool = False) -> None:
        """The reserved place is now key's lease (committed already: copied in)."""
        with self._lock:
            self._keys[key] = (caller, time.monotonic() if committed else None)

    def committed(self, key: str) -> None:
        """key's payload is written: its TTL runs from now."""
        with self._lock:
            if key in self._keys:
                self._keys[key] = (self._keys[key][0], time.monotonic())

    def released(self, key: str) -> None:
        """key's slot is free again (freed by key, or aborted)."""
        with self._lock:
            held = self._keys.pop(key, None)
            if held is not None:
                self._drop(held[0])

    def reaped(self, began: float) -> None:
        """A reap pass that began at ``began`` (time.monotonic(), plus any clock advance) ended.

        The leases committed at least the TTL before it are gone."""
        with self._lock:
            gone = [k for k, (_, since) in self._keys.items()
                    if since is not None and since + self.ttl_s <= began]
            for k in gone:
                self._drop(self._keys.pop(k)[0])

    def held(self, caller: str) -> int:
        with self._lock:
            return self._held.get(caller, 0)

    def _drop(self, caller: str) -> None:
        n = self._held.get(caller, 0) - 1
        if n > 0:
            self._held[caller] = n
        else:
            self._held.pop(caller, None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"share_refused": self.refused, "callers": len(self._held),
                    "caller_slots": self.per_caller}
