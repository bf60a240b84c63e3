"""The decode budget: memory the images being decoded may take at once, across requests.

A request's output is bounded (--max-output-mb) and its message by admission, but a few large
images that scale down to small outputs (8k JPEGs for a small model) decode to full-size buffers
first. Each request plans that memory from its images' headers (the largest of its items: the
server decodes one item of a request at a time) and takes it here before decoding anything; past
the budget it is refused at once (RESOURCE_EXHAUSTED, retryable), as admission refuses, and holds
its share until its work ends."""

from __future__ import annotations

import os
import threading


class DecodeBudget:
    """Bytes of planned decode memory held by the requests being served; one lock."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0  # held now
        self.holders = 0  # requests holding a share
        self.peak = 0
        self.rejected = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> bool:
        """Holds nbytes for a request, or counts a refusal.

        A request alone holds what it needs even past the budget (one image is bounded by
        --max-image-pixels), so a large one is never starved by the budget's size."""
        with self._lock:
            if self.holders and self.bytes + nbytes > self.max_bytes:
                self.rejected += 1
                return False
            self.holders += 1
            self.bytes += nbytes
            self.peak = max(self.peak, self.bytes)
            return True

    def give(self, nbytes: int) -> None:
        """Returns what take() held."""
        with self._lock:
            self.holders -= 1
            self.bytes -= nbytes

    def busy_message(self, index: int, nbytes: int) -> str:
        return (f"item {index}: decoding it needs {nbytes / 2**20:.0f} MiB while "
                f"{self.bytes / 2**20:.0f} MiB of this server's decode budget of "
                f"{self.max_bytes / 2**20:.0f} MiB (--max-decode-mb) is taken: retry with "
                "backoff or on another replica")

    def stats(self) -> dict[str, int]:
        return {"bytes": self.bytes, "holders": self.holders, "peak_bytes": self.peak,
                "max_bytes": self.max_bytes, "rejected": self.rejected}


def decode_bytes_limit(max_decode_mb: int) -> int:
    """Decode memory held at once.

    ``max_decode_mb`` MiB, or when 0 (auto) a quarter of physical memory, at least 256 MiB."""
    if max_decode_mb:
        return max_decode_mb * 2**20
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 8 << 30
    return max(256 << 20, mem // 4)
