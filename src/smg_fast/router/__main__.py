"""python -m smg_fast.router --worker HOST:PORT [--worker ...] [options]: see --help."""

from __future__ import annotations

import asyncio
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    try:
        from ..routing.config import config_from_args
        from ..routing.router import serve
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
        logging.getLogger("smg_fast.router").error("cannot start: %s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
