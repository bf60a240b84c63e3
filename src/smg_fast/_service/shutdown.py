"""Stopping a service process.

The stop signals, and closes that run off the event loop so that a stuck one neither blocks the loop
nor the process's exit."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("smg_fast.server")


def on_stop_signals(request_stop: Callable[[], Any]) -> None:
    """SIGTERM and SIGINT call request_stop on the running loop (drain; a second one hurries)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop)


async def off_loop(fn: Any, end: float, what: str) -> Any:
    """fn() on a daemon thread, awaited until the loop time ``end`` at most.

    A stuck close neither blocks the event loop nor (being a daemon) the process's exit."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(res: Any, exc: BaseException | None) -> None:
        if not fut.done():
            fut.set_result(res) if exc is None else fut.set_exception(exc)

    def run() -> None:
        res: Any = None
        err: BaseException | None = None
        try:
            res = fn()
        except BaseException as exc:  # reported on the loop
            err = exc
        try:
            loop.call_soon_threadsafe(settle, res, err)
        except RuntimeError:  # the loop is gone: nobody waits any more
            pass

    threading.Thread(target=run, name="smg-fast-close", daemon=True).start()
    try:
        return await asyncio.wait_for(fut, max(0.05, end - loop.time()))
    except asyncio.TimeoutError:
        log.warning("stop: %s did not finish in time; going on", what)
    except Exception:
        log.exception("stop: %s failed", what)
    return None
