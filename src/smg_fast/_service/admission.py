"""Admission.

How many Preprocess requests, and how many bytes of them, a server or router works on at once
(running, waiting for a worker, or routed). Past either bound a request is refused at once with
RESOURCE_EXHAUSTED, so memory stays bounded under a flood instead of queueing every message."""

from __future__ import annotations

import os
import threading


class Admission:
    """Counters under one lock; safe from the event loop and from worker threads."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.pending = 0  # admitted work not yet finished (outlives a cancelled call)
        self.bytes = 0  # their request bytes
        self.rejected = 0
        self.stopped = 0  # work stopped early: cancelled, past its deadline, cut by the drain
        self._typical = 0  # moving average of admitted sizes, for the pre-read check
        self._lock = threading.Lock()

    def full(self) -> bool:
        """Would a request of the recent typical size be refused?

        Asked before a message is read: its size is not known yet."""
        pending = self.pending
        return pending >= self.max_requests or (
            pending > 0 and self.bytes + self._typical > self.max_bytes)

    def admit(self, size: int) -> bool:
        """Takes a place for a request of ``size`` bytes, or counts a refusal.

        A lone request is always admitted (it is within the message limit), so big ones are never
        starved."""
        with self._lock:
            if self.pending >= self.max_requests or (
                    self.pending and self.bytes + size > self.max_bytes):
                self.rejected += 1
                return False
            self.pending += 1
            self.bytes += size
            self._typical += (size - self._typical) // 4
            return True

    def refused(self) -> None:
        with self._lock:
            self.rejected += 1

    def release(self, size: int, stopped: bool = False) -> None:
        with self._lock:
            self.pending -= 1
            self.bytes -= size
            self.stopped += stopped

    def note_stopped(self) -> None:
        with self._lock:
            self.stopped += 1

    def busy_message(self) -> str:
        return (f"server busy: {self.pending} request(s) / {self.bytes / 2**20:.0f} MiB "
                f"admitted, the limits are {self.max_requests} / "
                f"{self.max_bytes / 2**20:.0f} MiB: retry with backoff or on another replica")

    def stats(self) -> dict[str, int]:
        return {"requests": self.pending, "bytes": self.bytes,
                "max_requests": self.max_requests, "max_bytes": self.max_bytes,
                "rejected": self.rejected, "stopped": self.stopped}


def queued_bytes_limit(max_queued_mb: int) -> int:
    """Request bytes admitted at once.

    ``max_queued_mb`` MiB, or when 0 (auto) 1/8 of physical memory, 64 MiB..1 GiB."""
    if max_queued_mb:
        return max_queued_mb * 2**20
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 8 << 30
    return max(64 << 20, min(1 << 30, mem // 8))
