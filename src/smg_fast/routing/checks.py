"""Checks of the fleet's settings and members.

Made where the library takes them; the router checks its flags the same way, with their names."""

from __future__ import annotations

import math
from collections.abc import Iterable


def check_settings(*, load_factor: float, floor: int, affinity_keys: int,
                   affinity_wait: float, timeout: float | None, attempt_timeout: float | None,
                   max_message_mb: int, join_timeout: float, eject_after: int,
                   eject_base_s: float, keepalive_s: float) -> None:
    """ValueError naming the first setting out of its range."""
    def need(ok: bool, name: str, value: object, rule: str) -> None:
        if not ok:
            raise ValueError(f"{name} must be {rule}, got {value!r}")

    def finite(x: float | None) -> bool:
        return x is not None and math.isfinite(x)

    need(finite(load_factor) and load_factor >= 1.0, "load_factor", load_factor, ">= 1")
    need(floor >= 1, "floor", floor, ">= 1")
    need(affinity_keys >= 0, "affinity_keys", affinity_keys, ">= 0")
    need(finite(affinity_wait) and affinity_wait >= 0, "affinity_wait", affinity_wait,
         "a finite number of seconds >= 0")
    for name, value in (("timeout", timeout), ("attempt_timeout", attempt_timeout)):
        need(value is None or (finite(value) and value > 0), name, value,
             "None or a finite number of seconds > 0")
    need(1 <= max_message_mb <= 2047, "max_message_mb", max_message_mb, "1..2047")
    need(finite(join_timeout) and join_timeout > 0, "join_timeout", join_timeout,
         "a finite number of seconds > 0")
    need(eject_after >= 1, "eject_after", eject_after, ">= 1")
    need(finite(eject_base_s) and eject_base_s > 0, "eject_base_s", eject_base_s,
         "a finite number of seconds > 0")
    need(keepalive_s == 0 or (finite(keepalive_s) and keepalive_s >= 1), "keepalive_s",
         keepalive_s, "0 (off) or a finite number of seconds >= 1")


def parse_dns(spec: str) -> tuple[tuple[str, int] | None, str, int]:
    """``dns:///NAME:PORT`` or ``dns://SERVER[:PORT]/NAME:PORT``: (name server, name, port).

    The name server is None for the system's resolver (``dns:///``); its port defaults to 53.
    ValueError when spec is not of that form."""
    rest = spec[len("dns://"):] if spec.startswith("dns://") else None
    authority, sep, hostport = (rest or "").partition("/")
    name, _, port = hostport.rpartition(":")
    if rest is None or not sep or not name or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"a DNS target must be dns:///NAME:PORT or dns://SERVER/NAME:PORT, "
                         f"got {spec!r}")
    return (_name_server(authority, spec) if authority else None), name, int(port)


def _name_server(authority: str, spec: str) -> tuple[str, int]:
    """SERVER[:PORT] or [IPv6][:PORT] of a DNS target, the port 53 when not given."""
    host, colon, sport = authority.rpartition(":") if not authority.endswith("]") \
        else (authority, "", "")
    if not colon:
        host, sport = authority, "53"
    host = host.strip("[]")
    if not host or not sport.isdigit() or not 1 <= int(sport) <= 65535:
        raise ValueError(f"bad name server in {spec!r}")
    return host, int(sport)


def parse_srv(spec: str) -> tuple[tuple[str, int] | None, str]:
    """``dns+srv:///NAME`` or ``dns+srv://SERVER[:PORT]/NAME``: (name server, name).

    The name server is None for the system's (dns_srv.py); the members' ports come from the SRV
    records. ValueError when spec is not of that form."""
    rest = spec[len("dns+srv://"):] if spec.startswith("dns+srv://") else None
    authority, sep, name = (rest or "").partition("/")
    if rest is None or not sep or not name.strip(".") or "/" in name or ":" in name:
        raise ValueError(f"an SRV target must be dns+srv:///NAME or dns+srv://SERVER/NAME "
                         f"(the ports come from the records), got {spec!r}")
    return (_name_server(authority, spec) if authority else None), name


def is_dynamic(spec: str) -> bool:
    """Whether spec names members found at run time (``dns:``, ``dns+srv:`` or ``file:``).

    Not one member."""
    return spec.startswith(("dns:", "dns+srv:", "file:"))


def file_path(spec: str) -> str:
    """The path of a ``file:PATH`` / ``file:///PATH`` target; ValueError when empty."""
    path = spec[len("file://"):] if spec.startswith("file://") else spec[len("file:"):]
    if not path:
        raise ValueError(f"a file target must be file:///PATH, got {spec!r}")
    return path


def check_spec(spec: object, what: str = "a target") -> str:
    """A member (HOST:PORT), or a source of members; ValueError naming it otherwise.

    Sources: dns:///NAME:PORT, dns://SERVER/NAME:PORT, dns+srv:///NAME, dns+srv://SERVER/NAME,
    file:///PATH (one target a line)."""
    if not (isinstance(spec, str) and is_dynamic(spec)):
        return check_target(spec, what)
    try:
        if spec.startswith("dns:"):
            parse_dns(spec)
        elif spec.startswith("dns+srv:"):
            parse_srv(spec)
        else:
            file_path(spec)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    return spec


def check_target(target: object, what: str = "a target") -> str:
    """HOST:PORT (or [IPv6]:PORT) with a port in 1..65535; ValueError naming it otherwise."""
    if not isinstance(target, str):
        raise ValueError(f"{what} must be a HOST:PORT string, got {target!r}")
    host, sep, port = target.rpartition(":")
    if not sep or not host or host in ("[", "[]") or not port.isdigit() \
            or not 1 <= int(port) <= 65535:
        raise ValueError(f"{what} must be HOST:PORT, got {target!r}")
    return target


def check_targets(targets: str | Iterable[str], *, allow_empty: bool = False) -> list[str]:
    """The members given to a fleet as a list.

    One string is one member (not its characters), each must be HOST:PORT or a source of members
    (check_spec), and at least one is needed unless ``allow_empty``."""
    found = [targets] if isinstance(targets, str) else list(targets)
    if not found and not allow_empty:
        raise ValueError("targets must name at least one HOST:PORT")
    return [check_spec(t) for t in found]
