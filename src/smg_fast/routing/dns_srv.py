"""SRV discovery's questions: a name's SRV records, and which of them name the members.

``dns+srv://SERVER[:PORT]/NAME`` asks that name server; ``dns+srv:///NAME`` asks the system's
name servers (the ``nameserver`` lines of /etc/resolv.conf, in order, the next one when one gives
no answer; 127.0.0.1 when there is none), with NAME as given: fully qualified, no search domain
is applied (``_grpc._tcp.enc.default.svc.cluster.local``, not ``_grpc._tcp.enc``).

Of the records (RFC 2782), the lowest priority value names the members, each target at its
record's port; a higher one is a fallback, used only when no target of the lower ones has an
address. Weights are not used: the router places each image by its content hash under its load
bound, every member alike. A target of "." (no service at this name) names none, nor does a
record of port 0 (nothing listens there) or one whose target is not a host name (dropped while
the answer is read); at most ``MAX_TARGETS`` targets are taken (the lowest priorities first), and
at most ``MAX_MEMBERS`` members of them (discovery.py)."""

from __future__ import annotations

import asyncio
import logging

from .dns_message import SRV, DnsError, Srv
from .dns_wire import ask

log = logging.getLogger("smg_fast.routing")

RESOLV_CONF = "/etc/resolv.conf"
NAME_SERVER_PORT = 53
MAX_TARGETS = 256
MAX_MEMBERS = 1024  # members one source may name (the first in sorted order)


def name_servers(path: str | None = None) -> list[tuple[str, int]]:
    """The system's name servers, in order (resolv.conf(5), default RESOLV_CONF).

    127.0.0.1 when none is named."""
    found: list[tuple[str, int]] = []
    try:
        with open(RESOLV_CONF if path is None else path, encoding="utf-8", errors="replace") as f:
            for line in f:
                words = line.split("#", 1)[0].split(";", 1)[0].split()
                if len(words) >= 2 and words[0] == "nameserver":
                    found.append((words[1].split("%")[0], NAME_SERVER_PORT))
    except OSError:
        pass
    return found or [("127.0.0.1", NAME_SERVER_PORT)]


async def records(server: tuple[str, int] | None, name: str) -> list[Srv]:
    """name's SRV records from server, or from the system's name servers in turn.

    [] when it has none; DnsError when no server answered."""
    servers = [server] if server is not None else await asyncio.to_thread(name_servers)
    error = DnsError("no name server")
    for s in servers:
        try:
            got = await ask(s, name, SRV)
        except DnsError as exc:
            error = exc
            continue
        return [r for r in got if isinstance(r, Srv)]
    raise error


def by_priority(found: list[Srv], name: str) -> list[list[Srv]]:
    """The records that name members, grouped by priority, lowest first.

    Each group sorted by target and port; "." targets, port 0 and repeats dropped; at most
    MAX_TARGETS in all (logged when more)."""
    seen: set[tuple[str, int]] = set()
    ordered = []
    for r in sorted(found, key=lambda r: (r.priority, r.target.lower(), r.port)):
        key = (r.target.lower(), r.port)
        if r.target and r.port and key not in seen:
            seen.add(key)
            ordered.append(r)
    if len(ordered) > MAX_TARGETS:
        log.warning("discovery: %s has %d SRV targets; taking the first %d", name, len(ordered),
                    MAX_TARGETS)
        ordered = ordered[:MAX_TARGETS]
    groups: list[list[Srv]] = []
    for r in ordered:
        if groups and groups[-1][0].priority == r.priority:
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups
