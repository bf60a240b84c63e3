"""Settings with one source each, shared by the server's and the router's command lines.

A CLI flag whose default comes from its environment variable (or an alias of it), else the built-in
default that ``--help`` shows."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# (flag, env var, type, help); the default is the config dataclass's field of the flag's name.
Option = tuple[str, str, type, str]
# env var -> (another name read for it, the conversion from that name's unit or None)
Aliases = Mapping[str, tuple[str, Callable[[str], object] | None]]


def env_default(ap: argparse.ArgumentParser, env: Mapping[str, str], var: str, typ: type,
                default: object, aliases: Aliases) -> object:
    """The value of var, else of its alias (converted to the flag's unit), else default."""
    alias, convert = aliases.get(var, (None, None))
    for name, conv in ((var, typ), (alias, convert or typ)):
        raw = env.get(name, "") if name else ""
        if raw != "":
            try:
                return typ(conv(raw))
            except ValueError:
                unit = getattr(conv, "unit", typ.__name__)
                ap.error(f"environment variable {name}={raw!r} is not a valid {unit}")
    return default


def add_env_options(ap: argparse.ArgumentParser, options: Sequence[Option], base: Any,
                    env: Mapping[str, str], aliases: Aliases | None = None) -> None:
    """One argument per option, its default from the environment or ``base``.

    The help names the variable (and its alias)."""
    aliases = aliases or {}
    for flag, var, typ, text in options:
        dest = flag[2:].replace("-", "_")
        default = env_default(ap, env, var, typ, getattr(base, dest), aliases)
        alias = aliases.get(var)
        where = f"env {var}" + (f"; smg's {alias[0]} too" if alias else "")
        if alias and getattr(alias[1], "unit", "") == "int":
            where += " (in bytes)"
        ap.add_argument(flag, type=typ, default=default, help=f"{text} [{where}]")


def env_list(env: Mapping[str, str], var: str, sep: str = ",") -> list[str]:
    """A list-valued variable's non-empty entries."""
    return [s.strip() for s in env.get(var, "").split(sep) if s.strip()]
