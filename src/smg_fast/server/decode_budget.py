"""The decode budget: memory the images being decoded may take at once, across requests.

A request's output is bounded (--max-output-mb) and its message by admission, but a few large
images that scale down to small outputs (8k JPEGs for a small model) decode to full-size buffers
first. Each item plans that memory from its header and takes it here around its own decode only
(a pixel cache hit takes nothing), giving it back once its tensor is computed. Takers are served
in order of arrival: one that does not fit waits, and so do those behind it (a large item is not
starved by a stream of small ones), for at most ``wait_s`` (--decode-wait-s, and the request's
deadline); then it is refused (RESOURCE_EXHAUSTED, retryable), as admission refuses. An item
larger than the whole budget is taken when nothing else holds any (one image is bounded by
--max-image-pixels), and holds it for its own decode only."""

from __future__ import annotations

import os
import threading
import time
from collections import deque

DECODE_WAIT_S = 5.0  # the default of --decode-wait-s


class DecodeBudget:
    """Bytes of planned decode memory held by the items being decoded; one condition, FIFO."""

    def __init__(self, max_bytes: int, wait_s: float = DECODE_WAIT_S) -> None:
        self.max_bytes = max_bytes
        self.wait_s = wait_s
        self.bytes = 0  # held now
        self.holders = 0  # items holding a share
        self.peak = 0
        self.rejected = 0
        self.waited = 0  # takes that waited for room
        self._queue: deque[object] = deque()  # takers waiting, first first
        self._cond = threading.Condition()

    def take(self, nbytes: int, wait_s: float | None = None) -> bool:
        """Holds nbytes for an item, or counts a refusal.

        Waits in order of arrival, up to wait_s (at most the budget's own)."""
        wait_s = self.wait_s if wait_s is None else min(wait_s, self.wait_s)
        with self._cond:
            if not self._queue and self._fits(nbytes):
                self._hold(nbytes)
                return True
            me = object()
            self._queue.append(me)
            self.waited += 1
            end = time.monotonic() + wait_s
            try:
                while not (self._queue[0] is me and self._fits(nbytes)):
                    left = end - time.monotonic()
                    if left <= 0:
                        self.rejected += 1
                        return False
                    self._cond.wait(left)
                self._hold(nbytes)
                return True
            finally:
                self._queue.remove(me)
                self._cond.notify_all()  # the next in line may fit now

    def give(self, nbytes: int) -> None:
        """Returns what take() held."""
        with self._cond:
            self.holders -= 1
            self.bytes -= nbytes
            self._cond.notify_all()

    def _fits(self, nbytes: int) -> bool:
        return not self.holders or self.bytes + nbytes <= self.max_bytes

    def _hold(self, nbytes: int) -> None:
        self.holders += 1
        self.bytes += nbytes
        self.peak = max(self.peak, self.bytes)

    def busy_message(self, index: int, nbytes: int) -> str:
        return (f"item {index}: decoding it needs {nbytes / 2**20:.0f} MiB while "
                f"{self.bytes / 2**20:.0f} MiB of this server's decode budget of "
                f"{self.max_bytes / 2**20:.0f} MiB (--max-decode-mb) stayed taken for "
                f"{self.wait_s:g} s (--decode-wait-s): retry with backoff or on another replica")

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"bytes": self.bytes, "holders": self.holders, "peak_bytes": self.peak,
                    "max_bytes": self.max_bytes, "rejected": self.rejected,
                    "waited": self.waited, "waiting": len(self._queue)}


def cgroup_memory_limit(proc_cgroup: str = "/proc/self/cgroup",
                        root: str = "/sys/fs/cgroup") -> int | None:
    """This process's cgroup memory limit in bytes, or None without one.

    v2's memory.max or v1's memory.limit_in_bytes, looked for at the process's own cgroup path
    and at the root of the mount (a container with its own cgroup namespace sees its cgroup
    there); the smallest found."""
    places: list[str] = []
    try:
        with open(proc_cgroup) as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.strip("/")
        if controllers == "":  # v2
            places += [os.path.join(root, path, "memory.max"), os.path.join(root, "memory.max")]
        elif "memory" in controllers.split(","):  # v1
            places += [os.path.join(root, "memory", path, "memory.limit_in_bytes"),
                       os.path.join(root, "memory", "memory.limit_in_bytes")]
    limits = []
    for place in places:
        try:
            with open(place) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < 1 << 60:  # "max", or v1's "unlimited" page count
            limits.append(int(text))
    return min(limits) if limits else None


def decode_bytes_limit(max_decode_mb: int, cgroup_limit: int | None = -1) -> int:
    """Decode memory held at once.

    ``max_decode_mb`` MiB, or when 0 (auto) a quarter of the memory this process may use (the
    smaller of physical memory and its cgroup's limit), at least 256 MiB. ``cgroup_limit``: -1
    reads it (cgroup_memory_limit), None for none."""
    if max_decode_mb:
        return max_decode_mb * 2**20
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 8 << 30
    if cgroup_limit == -1:
        cgroup_limit = cgroup_memory_limit()
    if cgroup_limit is not None:
        mem = min(mem, cgroup_limit)
    return max(256 << 20, mem // 4)
