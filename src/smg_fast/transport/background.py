"""Slow releases off the request path: one daemon thread that runs clean-up calls a little later.

Unmapping a 50 MB shared-memory mapping costs ~4 ms, and freeing its pages (the last mapping of
an unlinked segment) ~20 ms more, all in the kernel with the GIL released. Done inline, that
lands on the request that happens to drop the last reference; ``call_later`` moves it to a
background thread, ``DELAY_S`` later, so the response goes out first. Exceptions are logged,
never raised.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("smg_fast")

_cond = threading.Condition()
_queue: deque[tuple[float, Callable[..., Any], tuple[Any, ...]]] = deque()
_running = 0  # calls taken off the queue and not finished
_owner_pid = -1
# Calls wait this long first: unmapping holds the process's mmap lock, which stalls the memory
# allocations of the response still on its way out (measured on a 1080p shm response: end of
# the work to the client holding the reply 3.0 ms when unmapping at once, 0.8 ms with the delay).
DELAY_S = 0.02


def call_later(fn: Callable[..., Any], *args: Any) -> None:
    """Runs fn(*args) on the background thread (and then drops fn and args).

    RuntimeError when the thread cannot be started (the next call tries again)."""
    global _owner_pid
    with _cond:
        if _owner_pid != os.getpid():  # first use, or a forked child: no thread yet
            _queue.clear()
            threading.Thread(target=_run, name="smg-fast-release", daemon=True).start()
            _owner_pid = os.getpid()
        _queue.append((time.monotonic() + DELAY_S, fn, args))
        _cond.notify_all()


def _reset_after_fork() -> None:
    """A forked child has no release thread, and the parent's queued calls never run in it."""
    global _cond, _queue, _running, _owner_pid
    _cond = threading.Condition()
    _queue = deque()
    _running = 0
    _owner_pid = -1


os.register_at_fork(after_in_child=_reset_after_fork)


def wait_idle(timeout: float = 10.0) -> bool:
    """Waits until every call queued so far has run; False on timeout."""
    with _cond:
        return _cond.wait_for(lambda: not _queue and not _running, timeout)


def _run() -> None:
    global _running
    while True:
        with _cond:
            while True:
                _cond.wait_for(lambda: bool(_queue))
                wait = _queue[0][0] - time.monotonic()
                if wait <= 0:
                    break
                _cond.wait(wait)
            item = _queue.popleft()
            _running += 1
        try:
            _, fn, args = item
            fn(*args)
        except Exception:
            log.exception("background release failed")
        finally:
            del item
            fn = args = None  # type: ignore[assignment]
            with _cond:
                _running -= 1
                _cond.notify_all()
