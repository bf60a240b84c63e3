"""DNS to one name server, as much as discovery needs: A, AAAA and SRV questions.

Used for ``dns://SERVER/NAME:PORT`` targets, whose name server is given (``dns:///NAME:PORT``
uses the system's resolver instead), and for ``dns+srv:`` ones (dns_srv.py). A question goes
over UDP with EDNS0 (we take answers of up to 4096 bytes); a truncated answer (TC) is asked
again over TCP of the same server. Datagrams that do not answer our question (another id, not a
response, another question) are ignored until the try's timeout. A try that gets no usable answer
(a timeout, SERVFAIL, a socket error, a malformed answer) is made again, ``TRIES`` in all; then
``DnsError``. A server that does not take EDNS0 (FORMERR) is asked again without it. Messages
are built and read in dns_message.py.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import struct

from .dns_message import (
    RCODE_FORMERR,
    DnsError,
    DnsMismatch,
    DnsRcode,
    DnsTruncated,
    Record,
    encode_name,
    parse,
    query,
)

TIMEOUT_S = 1.5  # one try: its UDP question and, when truncated, its TCP one
TRIES = 3
RETRY_PAUSE_S = 0.05  # before the second try; doubled before each next one
_TYPES = {1: "A", 28: "AAAA", 33: "SRV"}


class _Datagrams(asyncio.DatagramProtocol):
    """Queues what the connected UDP socket receives, and its errors (at most 64 waiting)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | Exception] = asyncio.Queue(64)

    def _put(self, item: bytes | Exception) -> None:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            pass  # a flood: what is queued is read first, the rest is lost as UDP may lose it

    def datagram_received(self, data: bytes, addr: object) -> None:
        self._put(data)

    def error_received(self, exc: Exception) -> None:
        self._put(exc)


async def _over_udp(server: tuple[str, int], name: str, qtype: int, edns: bool) -> list[Record]:
    """The answer over UDP; datagrams that answer something else are skipped."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    ident = secrets.randbelow(1 << 16)
    transport, proto = await loop.create_datagram_endpoint(
        _Datagrams, remote_addr=server, family=family)
    try:
        transport.sendto(query(name, qtype, ident, edns))
        while True:
            got = await proto.queue.get()
            if isinstance(got, Exception):
                raise DnsError(f"{server[0]}:{server[1]}: {got}")
            try:
                return parse(got, ident, name, qtype)
            except DnsMismatch:
                continue  # not ours (a late answer to an earlier try, or forged): wait on
    finally:
        transport.close()


async def _over_tcp(server: tuple[str, int], name: str, qtype: int, edns: bool) -> list[Record]:
    """The answer over TCP: one question, each message after its 2-byte length."""
    ident = secrets.randbelow(1 << 16)
    reader, writer = await asyncio.open_connection(*server)
    try:
        msg = query(name, qtype, ident, edns)
        writer.write(struct.pack("!H", len(msg)) + msg)
        await writer.drain()
        try:
            size, = struct.unpack("!H", await reader.readexactly(2))
            data = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise DnsError(f"{server[0]}:{server[1]} closed TCP before its answer") from None
    finally:
        writer.close()
    try:
        return parse(data, ident, name, qtype)
    except DnsTruncated:
        raise DnsError("answer truncated over TCP") from None


async def _once(server: tuple[str, int], name: str, qtype: int, edns: bool = True) -> list[Record]:
    """One question over UDP, and over TCP when the answer was truncated."""
    try:
        return await _over_udp(server, name, qtype, edns)
    except DnsTruncated:
        return await _over_tcp(server, name, qtype, edns)
    except DnsRcode as exc:
        if edns and exc.rcode == RCODE_FORMERR:  # an old server: no EDNS0 for it
            return await _once(server, name, qtype, edns=False)
        raise


async def ask(server: tuple[str, int], name: str, qtype: int, timeout: float | None = None,
              tries: int | None = None) -> list[Record]:
    """qtype's records of name, asked of server (host, port); [] when it has none.

    DnsError when no try of ``tries`` (TRIES) got an answer within timeout (TIMEOUT_S) each, or
    name is not a DNS name."""
    timeout = TIMEOUT_S if timeout is None else timeout
    tries = TRIES if tries is None else tries
    encode_name(name)  # (a name that cannot be asked is not tried again)
    where = f"{server[0]}:{server[1]}"
    error = DnsError("not asked")
    for n in range(max(1, tries)):
        if n:
            await asyncio.sleep(RETRY_PAUSE_S * 2 ** (n - 1))
        try:
            return await asyncio.wait_for(_once(server, name, qtype), timeout)
        except asyncio.TimeoutError:
            error = DnsError(f"no answer from {where} in {timeout:g} s")
        except DnsError as exc:
            error = exc
        except OSError as exc:
            error = DnsError(f"{where}: {exc}")
    raise DnsError(f"{name} {_TYPES.get(qtype, qtype)} from {where}, {tries} tries: {error}")
