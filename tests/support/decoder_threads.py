"""FFmpeg's decoder threads in this process, by the names FFmpeg gives them."""

from __future__ import annotations

import os


def decoder_threads() -> int:
    """This process's threads FFmpeg started (named "av:<codec>:..."), read from /proc.

    Other threads (a server's, a finished test's winding down) are not counted: the whole
    process's count changes under them."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().startswith("av:")
        except OSError:  # the thread ended while listed
            pass
    return count
