"""DNS messages, as much as discovery needs: one A, AAAA or SRV question, and its answer read back.

Written from RFC 1035 (the message format), RFC 2782 (SRV) and RFC 6891 (EDNS0's OPT record). An
answer is
checked before use: it must be a response (QR) to our id with our one question (name compared
without regard to ASCII case, type and class equal); names are followed through compression
pointers at most ``MAX_JUMPS`` times, and every label, name and record length is checked against
the message and RFC 1035's limits (an SRV target's name must end where its record's data ends)."""

from __future__ import annotations

import ipaddress
import re
import struct
from typing import NamedTuple

A, AAAA, SRV = 1, 28, 33
OPT = 41
CLASS_IN = 1
UDP_PAYLOAD = 4096  # what our OPT record says we take over UDP
MAX_JUMPS = 32  # compression pointers followed in one name
MAX_NAME = 255  # bytes of a name on the wire, its length bytes and root included
MAX_LABEL = 63
RCODE_FORMERR, RCODE_NXDOMAIN = 1, 3
_HEADER = struct.Struct("!HHHHHH")
_QR, _TC = 0x8000, 0x0200
_HOST = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")  # what an SRV target may be, or ""


class Srv(NamedTuple):
    """One SRV record: a member at target:port, chosen by priority (lowest first)."""

    priority: int
    weight: int
    port: int
    target: str  # "" for "." (no service at this name)


Record = str | Srv  # an address (A, AAAA) or an SRV record


class DnsError(Exception):
    """No usable answer: a timeout, a socket error, an error code, or a malformed message."""


class DnsParseError(DnsError):
    """A message that is not well formed (a bad name, a length past its end)."""


class DnsMismatch(DnsError):
    """A well formed message that is not the answer to our question (id, QR or question)."""


class DnsRcode(DnsError):
    """The server answered with an error code (SERVFAIL, REFUSED, ...)."""

    def __init__(self, rcode: int) -> None:
        super().__init__(f"server answered rcode {rcode}")
        self.rcode = rcode


class DnsTruncated(DnsError):
    """The answer did not fit (TC set): ask again over TCP."""


def encode_name(name: str) -> bytes:
    """name as length-prefixed labels ending in the root; DnsError when it cannot be one."""
    labels = [p.encode() for p in name.rstrip(".").split(".")]
    if not name.strip(".") or any(not 0 < len(p) <= MAX_LABEL for p in labels):
        raise DnsError(f"not a DNS name: {name!r}")
    wire = b"".join(bytes([len(p)]) + p for p in labels) + b"\0"
    if len(wire) > MAX_NAME:
        raise DnsError(f"DNS name over {MAX_NAME} bytes: {name!r}")
    return wire


def query(name: str, qtype: int, ident: int, edns: bool = True) -> bytes:
    """One question for name, recursion desired; with an OPT record (UDP_PAYLOAD) when edns."""
    head = _HEADER.pack(ident, 0x0100, 1, 0, 0, 1 if edns else 0)
    out = head + encode_name(name) + struct.pack("!HH", qtype, CLASS_IN)
    if edns:  # root owner, type OPT, class = payload size, ttl = ext. rcode/version/flags 0
        out += b"\0" + struct.pack("!HHIH", OPT, UDP_PAYLOAD, 0, 0)
    return out


def read_name(msg: bytes, pos: int, limit: int | None = None) -> tuple[bytes, int]:
    """The name at pos (labels joined by dots, as bytes) and the offset after it in place.

    Nothing at or past ``limit`` (default: the message's end) is read. DnsParseError for a
    pointer loop or past the end, a bad label type, or a name too long."""
    labels: list[bytes] = []
    size, jumps, end = 1, 0, None
    stop = len(msg) if limit is None else min(limit, len(msg))
    while True:
        if pos >= stop:
            raise DnsParseError("name runs past the end of the message")
        n = msg[pos]
        if n & 0xC0 == 0xC0:
            if pos + 1 >= stop:
                raise DnsParseError("compression pointer cut off")
            jumps += 1
            if jumps > MAX_JUMPS:
                raise DnsParseError(f"over {MAX_JUMPS} compression pointers (a loop?)")
            if end is None:
                end = pos + 2
            target = ((n & 0x3F) << 8) | msg[pos + 1]
            if target >= stop:
                raise DnsParseError("compression pointer past the end of the message")
            pos = target
            continue
        if n > MAX_LABEL:  # 0x40 and 0x80: label types RFC 1035 does not define
            raise DnsParseError(f"bad label type {n >> 6:#x}")
        if n == 0:
            return b".".join(labels), end if end is not None else pos + 1
        size += 1 + n
        if size > MAX_NAME:
            raise DnsParseError(f"name over {MAX_NAME} bytes")
        if pos + 1 + n > stop:
            raise DnsParseError("label runs past the end of the message")
        labels.append(msg[pos + 1:pos + 1 + n])
        pos += 1 + n


def _same_name(got: bytes, name: str) -> bool:
    return got.lower() == name.rstrip(".").encode().lower()


def parse(msg: bytes, ident: int, name: str, qtype: int) -> list[Record]:
    """The records of type qtype in an answer to query(name, qtype, ident).

    Addresses (str) for A and AAAA, Srv for SRV.
    [] for NXDOMAIN and for a name with no such records; DnsMismatch when msg answers another
    question, DnsTruncated when it did not fit, DnsRcode for an error code, DnsParseError when
    it is malformed."""
    if len(msg) < _HEADER.size:
        raise DnsParseError("message shorter than its header")
    rid, flags, qd, an, _, _ = _HEADER.unpack_from(msg)
    if rid != ident:
        raise DnsMismatch(f"id {rid}, asked {ident}")
    if not flags & _QR:
        raise DnsMismatch("a query, not a response")
    if qd == 0 and flags & 0xF:  # an error without the question (old servers' FORMERR)
        raise DnsRcode(flags & 0xF)
    if qd != 1:
        raise DnsMismatch(f"{qd} questions in the answer, asked 1")
    got, pos = read_name(msg, _HEADER.size)
    if pos + 4 > len(msg):
        raise DnsParseError("question cut off")
    gtype, gclass = struct.unpack_from("!HH", msg, pos)
    if not _same_name(got, name) or (gtype, gclass) != (qtype, CLASS_IN):
        raise DnsMismatch(f"answers {got!r} type {gtype} class {gclass}, asked {name!r} "
                          f"type {qtype}")
    pos += 4
    if flags & _TC:
        raise DnsTruncated("answer truncated")
    rcode = flags & 0xF
    if rcode == RCODE_NXDOMAIN:  # the name has no records (a headless service, no pod ready)
        return []
    if rcode:
        raise DnsRcode(rcode)
    out = []
    for _ in range(an):
        _, pos = read_name(msg, pos)
        if pos + 10 > len(msg):
            raise DnsParseError("record cut off")
        rtype, rclass, _, size = struct.unpack_from("!HHIH", msg, pos)
        pos += 10
        if pos + size > len(msg):
            raise DnsParseError("record data runs past the end of the message")
        data = msg[pos:pos + size]
        pos += size
        if rclass != CLASS_IN or rtype != qtype:
            continue  # a CNAME on the way, or another class
        if (rtype, size) == (A, 4):
            out.append(str(ipaddress.IPv4Address(data)))
        elif (rtype, size) == (AAAA, 16):
            out.append(str(ipaddress.IPv6Address(data)))
        elif rtype == SRV:
            srv = _srv(msg, pos - size, size)
            if srv is not None:
                out.append(srv)
        else:
            raise DnsParseError(f"address record of {size} bytes for type {rtype}")
    return out


def _srv(msg: bytes, start: int, size: int) -> Srv | None:
    """The SRV record whose data is msg[start:start + size].

    None when its target is a well-formed name but not a host name (the other records stand)."""
    if size < 7:  # priority, weight, port and at least the root name
        raise DnsParseError(f"SRV record of {size} bytes")
    priority, weight, port = struct.unpack_from("!HHH", msg, start)
    target, end = read_name(msg, start + 6, start + size)
    if end != start + size:
        raise DnsParseError("SRV target does not end where its record does")
    host = target.decode("latin-1")
    if host and not _HOST.fullmatch(host):
        return None
    return Srv(priority, weight, port, host)
