"""python -m smg_fast.server [options]: run the encode-stage service (see --help)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

from .._service.process import run


def _load() -> tuple[Any, Any]:
    from .app import serve
    from .flags import config_from_args

    return config_from_args, serve


def main(argv: list[str] | None = None) -> int:
    code, server = run(argv, _load, "smg_fast.server")
    if code:
        return code
    stuck = _lingering_threads(1.0)
    if server.work_pending or stuck:
        # A worker still inside one item of work nobody will read (told to stop before its
        # next one), or a close that did not finish: exit now instead of joining them at
        # interpreter exit, so the stop stays within the drain timeout. Shm segments were
        # unlinked already; the registry is closed.
        logging.getLogger("smg_fast.server").warning(
            "exiting with %d abandoned work item(s) and %d thread(s) still running",
            server.work_pending, len(stuck))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _lingering_threads(grace_s: float) -> list[threading.Thread]:
    """Non-daemon threads (which interpreter exit would join) still alive after grace_s."""
    deadline = time.monotonic() + grace_s
    while True:
        left = [t for t in threading.enumerate()
                if t is not threading.main_thread() and not t.daemon and t.is_alive()]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())
