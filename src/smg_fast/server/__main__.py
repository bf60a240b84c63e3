"""python -m smg_fast.server [options]: run the encode-stage service (see --help)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    try:
        from .app import serve
        from .config import config_from_args
    except ImportError as exc:  # the server extra is missing
        print(f"error: {exc}; install the server extra: pip install 'smg-fast[server]'",
              file=sys.stderr)
        return 2
    config = config_from_args(argv)
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server = asyncio.run(serve(config))
    except (ValueError, OSError) as exc:
        logging.getLogger("smg_fast.server").error("cannot start: %s", exc)
        return 2
    if server.work_pending:
        # A worker is still inside one item of work nobody will read (told to stop before its
        # next one): exit now instead of joining it at interpreter exit, so the stop stays
        # within the drain timeout. Its shm segments were unlinked; the registry is closed.
        logging.getLogger("smg_fast.server").warning(
            "exiting with %d abandoned work item(s) still running", server.work_pending)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
