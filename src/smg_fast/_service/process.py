"""What ``python -m smg_fast.server`` and ``python -m smg_fast.router`` share.

The server extra's import check, settings, logging, and running until stopped."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any

# --log-level of both processes (lower case; logging's own names upper-cased).
LOG_LEVELS = ("debug", "info", "warning", "error")


def run(argv: list[str] | None, load: Callable[[], tuple[Any, Any]], name: str) -> tuple[int, Any]:
    """Runs one process: its settings, its logging, its serve() until stopped.

    load() gives (config_from_args, serve); returns (exit code, what serve returned). 2: the
    server extra is missing, or the process could not start (bad settings exit earlier)."""
    try:
        config_from_args, serve = load()
    except ImportError as exc:
        print(f"error: {exc}; install the server extra: pip install 'smg-fast[server]'",
              file=sys.stderr)
        return 2, None
    config = config_from_args(argv)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return 0, asyncio.run(serve(config))
    except (ValueError, OSError) as exc:
        logging.getLogger(name).error("cannot start: %s", exc)
        return 2, None
