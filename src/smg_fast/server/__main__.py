"""python -m smg_fast.server [options]: run the encode-stage service (see --help)."""

from __future__ import annotations

import asyncio
import logging
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
        asyncio.run(serve(config))
    except (ValueError, OSError) as exc:
        logging.getLogger("smg_fast.server").error("cannot start: %s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
