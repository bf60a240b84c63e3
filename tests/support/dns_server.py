"""A tiny authoritative DNS server for the discovery tests: UDP on 127.0.0.1, A and AAAA.

Written from RFC 1035's message format (independently of smg_fast.routing.dns_wire, which the
tests check against it): the names and their addresses are a dict the test changes while it runs;
an unknown name is NXDOMAIN, a known one without records of the type asked is an empty answer."""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading


class DnsServer:
    """``with DnsServer({"enc.test": ["127.0.0.2", "::1"]}) as dns: dns.port``."""

    def __init__(self, records: dict[str, list[str]]) -> None:
        self.records = {k.lower().rstrip("."): list(v) for k, v in records.items()}
        self.queries = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="test-dns")

    def set(self, name: str, addresses: list[str]) -> None:
        with self._lock:
            self.records[name.lower().rstrip(".")] = list(addresses)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                msg, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            try:
                self._sock.sendto(self._answer(msg), peer)
            except (ValueError, struct.error, IndexError):
                continue

    def _answer(self, msg: bytes) -> bytes:
        ident, _, qdcount = struct.unpack("!HHH", msg[:6])
        pos, labels = 12, []
        while msg[pos]:
            labels.append(msg[pos + 1:pos + 1 + msg[pos]].decode())
            pos += 1 + msg[pos]
        question = msg[12:pos + 5]
        qtype, = struct.unpack("!H", msg[pos + 1:pos + 3])
        name = ".".join(labels).lower()
        with self._lock:
            self.queries += 1
            known = self.records.get(name)
        answers = []
        for a in known or []:
            ip = ipaddress.ip_address(a)
            if (ip.version, qtype) in ((4, 1), (6, 28)):
                # a pointer to the question's name (offset 12), type, class IN, ttl 0, the address
                answers.append(struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(ip.packed))
                               + ip.packed)
        rcode = 3 if known is None else 0
        flags = 0x8000 | 0x0400 | 0x0100 | rcode  # answer, authoritative, recursion desired
        return struct.pack("!HHHHHH", ident, flags, 1, len(answers), 0, 0) + question + b"".join(
            answers)
