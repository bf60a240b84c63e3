"""DNS over UDP, as much as discovery needs: A and AAAA questions to one name server.

Used for ``dns://SERVER/NAME:PORT`` targets, whose name server is given (``dns:///NAME:PORT``
uses the system's resolver instead). Answers are checked before use: the id and the question must
match, names are followed through compression pointers with a bound on jumps, and every length is
checked against the message; anything else is a ``DnsError``."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import struct

A, AAAA = 1, 28
_CLASS_IN = 1
_MAX_JUMPS = 32
_MAX_ANSWER = 4096  # bytes read from one datagram


class DnsError(Exception):
    """No usable answer: a timeout, an error code, or a malformed message."""


def query(name: str, qtype: int, ident: int) -> bytes:
    """One question for name, recursion desired."""
    labels = [p for p in name.rstrip(".").split(".") if p]
    if not labels or any(len(p.encode()) > 63 for p in labels):
        raise DnsError(f"not a DNS name: {name!r}")
    qname = b"".join(bytes([len(p.encode())]) + p.encode() for p in labels) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + struct.pack(
        "!HH", qtype, _CLASS_IN)


def _skip_name(msg: bytes, pos: int) -> int:
    """The offset after the (possibly compressed) name at pos."""
    jumps = 0
    while True:
        if pos >= len(msg):
            raise DnsError("truncated name")
        n = msg[pos]
        if n & 0xC0 == 0xC0:
            return pos + 2
        if n & 0xC0:
            raise DnsError("bad label type")
        if n == 0:
            return pos + 1
        pos += 1 + n
        jumps += 1
        if jumps > 127:
            raise DnsError("name too long")


def parse(msg: bytes, ident: int, qtype: int) -> list[str]:
    """The addresses of type qtype in an answer to query(…, qtype, ident).

    [] for NXDOMAIN and for a name with no such records."""
    if len(msg) < 12:
        raise DnsError("short answer")
    rid, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    if rid != ident or not flags & 0x8000:
        raise DnsError("not the answer to our question")
    rcode = flags & 0xF
    if rcode == 3:  # NXDOMAIN: the name has no records (a headless service with no pod ready)
        return []
    if rcode:
        raise DnsError(f"server answered rcode {rcode}")
    if flags & 0x0200:
        raise DnsError("truncated answer (over UDP's size)")
    pos = 12
    for _ in range(qd):
        pos = _skip_name(msg, pos) + 4
    out = []
    for _ in range(an):
        pos = _skip_name(msg, pos)
        if pos + 10 > len(msg):
            raise DnsError("truncated record")
        rtype, rclass, _, size = struct.unpack("!HHIH", msg[pos:pos + 10])
        pos += 10
        data = msg[pos:pos + size]
        if len(data) != size:
            raise DnsError("truncated record data")
        pos += size
        if rclass != _CLASS_IN or rtype != qtype:
            continue  # a CNAME on the way, or another class
        if (rtype, size) == (A, 4):
            out.append(str(ipaddress.IPv4Address(data)))
        elif (rtype, size) == (AAAA, 16):
            out.append(str(ipaddress.IPv6Address(data)))
        else:
            raise DnsError("bad address record")
    return out


class _Answer(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.got: asyncio.Future = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: object) -> None:
        if not self.got.done():
            self.got.set_result(data[:_MAX_ANSWER])

    def error_received(self, exc: Exception) -> None:
        if not self.got.done():
            self.got.set_exception(DnsError(str(exc)))


async def ask(server: tuple[str, int], name: str, qtype: int, timeout: float = 2.0) -> list[str]:
    """qtype's addresses of name, asked of server (host, port) over UDP. DnsError otherwise."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    ident = secrets.randbelow(1 << 16)
    transport, proto = await loop.create_datagram_endpoint(
        _Answer, remote_addr=server, family=family)
    try:
        transport.sendto(query(name, qtype, ident))
        try:
            data = await asyncio.wait_for(proto.got, timeout)
        except asyncio.TimeoutError:
            raise DnsError(f"no answer from {server[0]}:{server[1]} in {timeout:g} s") from None
    finally:
        transport.close()
    return parse(data, ident, qtype)
