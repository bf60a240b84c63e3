"""Members found at run time: DNS names and a watched file.

A fleet's targets may name sources instead of members:

- ``dns:///NAME:PORT``: NAME's A and AAAA records through the system's resolver (search domains
  and /etc/hosts included), each address a member at PORT; ``dns://SERVER[:PORT]/NAME:PORT``
  asks that name server instead (dns_wire.py). A Kubernetes headless Service answers each ready
  pod's address.
- ``dns+srv:///NAME`` or ``dns+srv://SERVER[:PORT]/NAME``: NAME's SRV records, each target's
  A and AAAA addresses a member at the record's port (which records count: dns_srv.py); the
  targets resolve as ``dns:`` names do, through the system's resolver or that name server. A
  Kubernetes Service's named port answers ``_PORTNAME._tcp.SERVICE.NAMESPACE.svc.cluster.local``.
- ``file:///PATH``: a file of targets, one a line (HOST:PORT or dns:, ``#`` comments), that an
  orchestrator rewrites.

Every source is read again each ``every_s`` seconds, and at once when a member goes down (a pod
replaced, an address moved). A source that cannot be read keeps what it gave last (a DNS outage
does not empty the fleet, nor does an A or AAAA query failing alone drop that family's members, nor
an SRV target's failing its own);
a name with no records (NXDOMAIN, or none of either type) gives none. Files are read on a thread,
never on the event loop.
The members' strings are the addresses (``10.0.0.7:50051``, ``[fd00::7]:50051``): every router
resolving the same name agrees on them, and so on each image's order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable

from .checks import check_spec, file_path, is_dynamic, parse_dns, parse_srv
from .dns_message import AAAA, A, DnsError
from .dns_srv import MAX_MEMBERS, by_priority, records
from .dns_wire import ask

log = logging.getLogger("smg_fast.routing")

FILE_POLL_S = 1.0  # a watched file is looked at this often (a stat), whatever every_s is


def member_target(address: str, port: int) -> str:
    """address:port, an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


# getaddrinfo's answers for a name without addresses of the family asked (not a failure)
_NO_ADDRESS = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", -5),
               getattr(socket, "EAI_ADDRFAMILY", -9)}


async def _system(name: str, port: int, family: socket.AddressFamily) -> list[str]:
    """name's addresses of family through the system's resolver; [] when it has none."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(name, port, family=family, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in _NO_ADDRESS:
            return []
        raise DnsError(f"{name} ({family.name}): {exc}") from exc
    return [info[4][0].split("%")[0] for info in infos]


Families = list[list[str] | BaseException]  # IPv4 and IPv6: the addresses or why not
Keep = Callable[[str, Families], list[list[str] | None]]  # (name, answers) -> addresses to use


async def families(server: tuple[str, int] | None, name: str, port: int) -> Families:
    """name's IPv4 and IPv6 addresses now, from server or the system's resolver.

    Each a list or the exception asking raised; a family without records (NXDOMAIN, or none of
    its type) is an empty list."""
    if server is None:
        asks = [_system(name, port, f) for f in (socket.AF_INET, socket.AF_INET6)]
    else:
        asks = [ask(server, name, t) for t in (A, AAAA)]  # type: ignore[misc]
    return list(await asyncio.gather(*asks, return_exceptions=True))


async def resolve_families(spec: str) -> Families:
    """A dns: spec's IPv4 and IPv6 addresses now (families())."""
    server, name, port = parse_dns(spec)
    return await families(server, name, port)


def _strict(name: str, found: Families) -> list[list[str] | None]:
    """Every family's addresses; the first failure raised."""
    for r in found:
        if isinstance(r, BaseException):
            raise r
    return found  # type: ignore[return-value]


async def srv_members(spec: str, keep: Keep = _strict) -> list[str]:
    """The members a dns+srv: spec names now, sorted (dns_srv.py says which records count).

    keep(target, its families) gives the addresses to use of each target. DnsError when the
    SRV question failed."""
    server, name = parse_srv(spec)
    groups = by_priority(await records(server, name), name)
    for group in groups:
        answers = await asyncio.gather(*(families(server, r.target, r.port) for r in group))
        found = {member_target(a, r.port) for r, fams in zip(group, answers, strict=True)
                 for f in keep(r.target, fams) if f for a in f}
        if found:
            return capped(spec, sorted(found))
    return []


_capped_logged: set[str] = set()  # sources whose cap is logged (once while it lasts)


def capped(spec: str, members: list[str]) -> list[str]:
    """The first MAX_MEMBERS of a source's sorted members (a warning once while it names more).

    A source naming tens of thousands (many targets of many addresses each) would have the
    router join and follow each of them."""
    if len(members) <= MAX_MEMBERS:
        _capped_logged.discard(spec)
        return members
    if spec not in _capped_logged:
        _capped_logged.add(spec)
        log.warning("discovery: %s names %d members; taking the first %d", spec, len(members),
                    MAX_MEMBERS)
    return members[:MAX_MEMBERS]


def targets(spec: str, families: Iterable[list[str] | None]) -> list[str]:
    """The sorted member targets of a dns: spec's addresses (capped())."""
    port = parse_dns(spec)[2]
    return capped(spec, sorted(member_target(a, port)
                               for a in {a for f in families if f for a in f}))


async def resolve(spec: str) -> list[str]:
    """The members a dns: or dns+srv: spec names now, sorted.

    DnsError when a question failed (either family of any name)."""
    if spec.startswith("dns+srv:"):
        return await srv_members(spec)
    return targets(spec, _strict(spec, await resolve_families(spec)))


def read_targets(path: str) -> list[str]:
    """The targets of a watched file: one a line, ``#`` comments; a bad line is skipped (logged).

    OSError when it cannot be read."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            spec = line.split("#", 1)[0].strip()
            if not spec:
                continue
            try:
                if spec.startswith("file:"):
                    raise ValueError("a file of targets cannot name another file")
                out.append(check_spec(spec, f"{path}:{n}"))
            except ValueError as exc:
                log.error("discovery: %s", exc)
    return out


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def _read_file(path: str) -> tuple[tuple[int, int], list[str]]:
    """The file's (mtime_ns, size) and its targets (read_targets); OSError when unreadable."""
    return _stamp(path), read_targets(path)


class Discovery:
    """Reads the sources and reports what changed.

    ``changed(joined, left)`` gets the members that appeared and those that vanished since the
    last report."""

    def __init__(self, specs: Iterable[str], every_s: float,
                 changed: Callable[[list[str], list[str]], Awaitable[None]]) -> None:
        self.specs = list(specs)
        self.every_s = every_s
        self.changed = changed
        self.current: list[str] = []
        self._last: dict[str, list[str]] = {}  # source -> what it gave last
        # dns source, or (dns+srv source, target) -> its IPv4 and IPv6 addresses read last
        # (None: never read)
        self._families: dict[str | tuple[str, str], list[list[str] | None]] = {}
        self._failing: set[tuple[str | tuple[str, str], int]] = set()  # failing now (logged)
        self._stamps: dict[str, tuple[int, int]] = {}  # file -> (mtime_ns, size) read last
        self._poke = asyncio.Event()
        self.rounds = 0

    def poke(self) -> None:
        """Read the sources again now (a member went down)."""
        self._poke.set()

    async def read(self) -> list[str]:
        """Every member the sources name now, in the order given (a source's in its order)."""
        out: dict[str, None] = {}
        for spec in self.specs:
            for t in await self._expand(spec):
                out.setdefault(t)
        self.rounds += 1
        return list(out)

    async def _expand(self, spec: str, depth: int = 0) -> list[str]:
        if not is_dynamic(spec):
            return [spec]
        try:
            if spec.startswith("dns:"):
                got = await self._resolve(spec)
            elif spec.startswith("dns+srv:"):
                got = await self._resolve_srv(spec)
            else:
                self._stamps[spec], lines = await asyncio.to_thread(_read_file, file_path(spec))
                got = []
                for line in lines:
                    got.extend(await self._expand(line, depth + 1))
        except (DnsError, OSError, UnicodeDecodeError) as exc:
            kept = self._last.get(spec, [])
            log.warning("discovery: cannot read %s (%s); keeping its %d member(s)", spec, exc,
                        len(kept))
            return kept
        if got != self._last.get(spec):
            log.info("discovery: %s gives %s", spec, ", ".join(got) or "no member")
        self._last[spec] = got
        return got

    async def _resolve(self, spec: str) -> list[str]:
        """A dns: source's members: a family whose query failed keeps what it gave last.

        A family never read yet adds none while the other answers (a resolver that always fails
        AAAA still gives the IPv4 members); DnsError when both fail."""
        results = await resolve_families(spec)
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) == len(results):
            raise errors[0]
        return targets(spec, self._kept(spec, spec, results))

    async def _resolve_srv(self, spec: str) -> list[str]:
        """A dns+srv: source's members: each target's failed family keeps what it gave last.

        What is kept of targets the records no longer lead to is forgotten."""
        asked: set[str] = set()

        def keep(target: str, found: Families) -> list[list[str] | None]:
            asked.add(target)
            return self._kept((spec, target), target, found)

        got = await srv_members(spec, keep)
        for key in [k for k in self._families if isinstance(k, tuple) and k[0] == spec
                    and k[1] not in asked]:
            del self._families[key]
            self._failing.difference_update({(key, 0), (key, 1)})
        return got

    def _kept(self, key: str | tuple[str, str], what: str,
              results: Families) -> list[list[str] | None]:
        """Each family's addresses now, or what it gave last where its query failed.

        A failure is logged once while it lasts."""
        last = self._families.setdefault(key, [None] * len(results))
        for i, r in enumerate(results):
            if not isinstance(r, BaseException):
                last[i] = r
                self._failing.discard((key, i))
            elif (key, i) not in self._failing:
                self._failing.add((key, i))
                log.warning("discovery: %s: %s family failed (%s); keeping its %d address(es)",
                            what, ("IPv4", "IPv6")[i], r, len(last[i] or []))
        return last

    def _files_changed(self) -> bool:
        """Whether a watched file's stamp differs from the one read last (a stat each; blocks)."""
        for spec in self.specs:
            if spec.startswith("file:"):
                try:
                    stamp = _stamp(file_path(spec))
                except OSError:
                    continue
                if self._stamps.get(spec) != stamp:
                    return True
        return False

    async def run(self, current: list[str]) -> None:
        """Reports changes from current on, until cancelled."""
        self.current = list(current)
        loop = asyncio.get_running_loop()
        files = any(s.startswith("file:") for s in self.specs)
        while True:
            end = loop.time() + self.every_s
            while loop.time() < end and not self._poke.is_set():
                step = min(end - loop.time(), FILE_POLL_S if files else self.every_s)
                poked = asyncio.ensure_future(self._poke.wait())
                try:
                    await asyncio.wait([poked], timeout=max(0.0, step))
                finally:
                    poked.cancel()
                if files and await asyncio.to_thread(self._files_changed):
                    break
            self._poke.clear()
            try:
                now = await self.read()
            except Exception:  # keep discovering whatever broke
                log.exception("discovery failed")
                continue
            joined = [t for t in now if t not in self.current]
            left = [t for t in self.current if t not in now]
            self.current = now
            if joined or left:
                await self.changed(joined, left)
