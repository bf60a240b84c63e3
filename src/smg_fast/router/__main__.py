"""python -m smg_fast.router --worker HOST:PORT [--worker ...] [options]: see --help."""

from __future__ import annotations

import sys
from typing import Any

from .._service.process import run


def _load() -> tuple[Any, Any]:
    from .app import serve
    from .flags import config_from_args

    return config_from_args, serve


def main(argv: list[str] | None = None) -> int:
    return run(argv, _load, "smg_fast.router")[0]


if __name__ == "__main__":
    sys.exit(main())
