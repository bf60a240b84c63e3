"""A tiny authoritative DNS server for the discovery tests: UDP and TCP on 127.0.0.1, A, AAAA, SRV.

Written from RFC 1035's message format and RFC 2782's SRV record (independently of
smg_fast.routing.dns_message, which the tests check against it): the names and their addresses,
and the names and their SRV records (priority, weight, port, target; the target written out in
full, as RFC 2782 asks), are dicts the test changes while it runs; an unknown name is NXDOMAIN, a
known one without records of the type asked is an empty answer.
Misbehaviours a test may switch on while it runs: ``fail`` (a query type -> "servfail" or
"silent"), ``fail_first`` (that many queries get SERVFAIL), ``truncate`` (UDP answers carry TC and
no records; TCP answers in full), ``no_edns`` (FORMERR for a query with an additional record,
as a server without EDNS0 answers) and ``decoy`` ("id" or "question": a forged datagram, another id
or the right id for another name, goes before each UDP answer)."""

from __future__ import annotations

import ipaddress
import select
import socket
import struct
import threading


def _bind_pair(host: str, port: int) -> tuple[socket.socket, socket.socket]:
    """A UDP and a TCP socket on host, the same port (port, or any free one when 0)."""
    for _ in range(50):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((host, port))
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind((host, udp.getsockname()[1]))
        except OSError:
            udp.close()
            tcp.close()
            continue
        tcp.listen(8)
        return udp, tcp
    raise AssertionError("no port free for both UDP and TCP")


class DnsServer:
    """``with DnsServer({"enc.test": ["127.0.0.2", "::1"]}) as dns: dns.port``.

    ``srv={"_grpc._tcp.enc.test": [(10, 5, 50051, "a.enc.test")]}`` adds SRV records."""

    def __init__(self, records: dict[str, list[str]],
                 srv: dict[str, list[tuple[int, int, int, str]]] | None = None,
                 port: int = 0, host: str = "127.0.0.1") -> None:
        self.records = {k.lower().rstrip("."): list(v) for k, v in records.items()}
        self.srv = {k.lower().rstrip("."): list(v) for k, v in (srv or {}).items()}
        self.queries = 0
        self.tcp_queries = 0
        self.asked: list[tuple[int, bytes]] = []  # (query type, the query as received)
        self.fail: dict[int, str] = {}
        self.fail_first = 0
        self.truncate = False
        self.decoy = ""
        self.no_edns = False
        self._lock = threading.Lock()
        self._udp, self._tcp = _bind_pair(host, port)
        self.port = self._udp.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="test-dns")

    def set(self, name: str, addresses: list[str]) -> None:
        with self._lock:
            self.records[name.lower().rstrip(".")] = list(addresses)

    def set_srv(self, name: str, records: list[tuple[int, int, int, str]]) -> None:
        with self._lock:
            self.srv[name.lower().rstrip(".")] = list(records)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._udp.close()
        self._tcp.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._udp, self._tcp], [], [], 0.1)
            try:
                if self._udp in ready:
                    msg, peer = self._udp.recvfrom(4096)
                    for out in self._udp_answers(msg):
                        self._udp.sendto(out, peer)
                if self._tcp in ready:
                    self._serve_tcp()
            except (OSError, ValueError, struct.error, IndexError):
                continue

    def _udp_answers(self, msg: bytes) -> list[bytes]:
        out = self._answer(msg, udp=True)
        if out is None:
            return []
        if self.decoy == "id":  # the forger's answer to our question, under another id
            forged = self._answer(msg, udp=True, forge=True)
            return [struct.pack("!H", (msg[0] << 8 | msg[1]) ^ 1) + forged[2:], out]
        if self.decoy == "question":  # our id, answering another name
            end = self._question(msg)[2]
            other = msg[:12] + b"\x05other\x04test\x00" + msg[end - 4:]
            return [self._answer(other, udp=True, forge=True), out]
        return [out]

    def _serve_tcp(self) -> None:
        conn, _ = self._tcp.accept()
        with conn:
            conn.settimeout(2.0)
            size, = struct.unpack("!H", conn.recv(2, socket.MSG_WAITALL))
            msg = conn.recv(size, socket.MSG_WAITALL)
            out = self._answer(msg, udp=False)
            if out is not None:
                conn.sendall(struct.pack("!H", len(out)) + out)

    def _question(self, msg: bytes) -> tuple[str, int, int]:
        """The asked name (lowercase), its type, and where the question ends."""
        pos, labels = 12, []
        while msg[pos]:
            labels.append(msg[pos + 1:pos + 1 + msg[pos]].decode())
            pos += 1 + msg[pos]
        qtype, = struct.unpack("!H", msg[pos + 1:pos + 3])
        return ".".join(labels).lower(), qtype, pos + 5

    def _answer(self, msg: bytes, udp: bool, forge: bool = False) -> bytes | None:
        """The answer to msg (None: silent); forge: 203.0.113.9 / 2001:db8::9, counted nowhere."""
        ident = struct.unpack("!H", msg[:2])[0]
        name, qtype, end = self._question(msg)
        question = msg[12:end]
        with self._lock:
            if not forge:
                self.queries += 1
                self.tcp_queries += not udp
                self.asked.append((qtype, bytes(msg)))
            known = self.records.get(name)
            services = self.srv.get(name)
            if services is not None and known is None:
                known = []  # a name with SRV records only: NODATA for A and AAAA
            failing = self.fail.get(qtype, "")
            if self.fail_first > 0 and not forge:
                self.fail_first -= 1
                failing = "servfail"
        if failing == "silent" and not forge:
            return None
        answers = []
        for a in ["203.0.113.9", "2001:db8::9"] if forge else known or []:
            ip = ipaddress.ip_address(a)
            if (ip.version, qtype) in ((4, 1), (6, 28)):
                # a pointer to the question's name (offset 12), type, class IN, ttl 0, the address
                answers.append(struct.pack("!HHHIH", 0xC00C, qtype, 1, 0, len(ip.packed))
                               + ip.packed)
        if qtype == 33 and not forge:
            for prio, weight, port, target in services or []:
                labels = [p.encode() for p in target.rstrip(".").split(".") if p]
                rdata = struct.pack("!HHH", prio, weight, port) + b"".join(
                    bytes([len(p)]) + p for p in labels) + b"\0"
                answers.append(struct.pack("!HHHIH", 0xC00C, 33, 1, 0, len(rdata)) + rdata)
        rcode = 3 if known is None and not forge else 0
        if failing == "servfail" and not forge:
            rcode, answers = 2, []
        flags = 0x8000 | 0x0400 | 0x0100  # answer, authoritative, recursion desired
        if self.no_edns and msg[10:12] != b"\0\0" and not forge:
            # FORMERR as old servers send it: the header alone, without the question
            return struct.pack("!HHHHHH", ident, flags | 1, 0, 0, 0, 0)
        flags |= rcode
        if udp and self.truncate and not forge:
            flags, answers = flags | 0x0200, []
        return struct.pack("!HHHHHH", ident, flags, 1, len(answers), 0, 0) + question + b"".join(
            answers)
