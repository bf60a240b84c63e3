"""A budget of log lines: per-member lines are cut short when thousands of members change at once.

A discovery source may name many members that all go down together (a node lost, a DNS answer
of unreachable addresses): one line each, every reconnect, would flood the log. ``LogBudget``
lets ``burst`` lines through per ``window_s`` and counts the rest; the next line let through
says how many were left out."""

from __future__ import annotations

import logging
import time


class LogBudget:
    """At most burst lines per window_s through log(); the others counted, then summarized."""

    def __init__(self, logger: logging.Logger, burst: int = 20, window_s: float = 10.0) -> None:
        self.logger = logger
        self.burst = burst
        self.window_s = window_s
        self.suppressed = 0  # left out since the last line let through
        self._start = -float("inf")
        self._used = 0

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Logs msg % args if the window has room left; False when it was left out."""
        now = time.monotonic()
        if now - self._start >= self.window_s:
            self._start, self._used = now, 0
        if self._used >= self.burst:
            self.suppressed += 1
            return False
        self._used += 1
        if self.suppressed:
            self.logger.log(level, "(%d member log line(s) left out in the last %g s)",
                            self.suppressed, self.window_s)
            self.suppressed = 0
        self.logger.log(level, msg, *args)
        return True
