"""Stopping a service process.

The stop signals, the wait for callers to stop sending before the gRPC server stops, and closes that
run off the event loop so that a stuck one neither blocks the loop nor the process's exit."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("smg_fast.server")

# A drain stops the gRPC server only once no call has come for this long (or at its deadline).
QUIET_S = 0.5


class Arrivals:
    """When the last call came, so that a drain stops the gRPC server only once callers stopped.

    gRPC cancels the calls that reach a server after it began to stop and before its callers read
    its GOAWAY, and their callers read CANCELLED, their own cancellation, instead of "retry
    elsewhere". While draining every call is answered UNAVAILABLE and the health is NOT_SERVING,
    so routers and well-behaved callers stop sending within moments; waiting until the calls stop
    leaves nothing for the stop to cancel."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def note(self) -> None:
        """A call came now."""
        self.last = time.monotonic()

    async def quiet(self, quiet_s: float, end: Callable[[], float]) -> bool:
        """Waits until no call came for quiet_s, or until the loop time end().

        end() is read as it goes (a second stop signal brings it forward). True when it went
        quiet; False at end."""
        loop = asyncio.get_running_loop()
        while True:
            now = time.monotonic()
            calm = self.last + quiet_s
            if now >= calm:
                return True
            left = end() - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(calm - now, left, 0.05))


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
