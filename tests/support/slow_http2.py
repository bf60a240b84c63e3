"""A slow gRPC client for the receipt tests, written on a raw socket from RFC 9113 (HTTP/2).

It opens Preprocess calls on one connection, sends part of a large message on each (as HTTP/2
flow control allows) and then stalls, which no gRPC client library does on purpose. Headers are
HPACK literals without indexing or Huffman coding (RFC 7541 6.2.2); what the server sends back is
read only as frames: window updates, settings and pings (acknowledged), and which streams ended
(trailers, RST_STREAM or GOAWAY)."""

from __future__ import annotations

import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5


def _literal(name: str, value: str) -> bytes:
    """One header field: literal without indexing, new name (lengths under 127)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack("!I", len(payload))[1:] + struct.pack("!BBI", kind, flags, stream) + payload


class SlowClient:
    """One HTTP/2 connection to a gRPC server on host:port."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.authority = f"{host}:{port}"
        self.conn_window = 65535
        self.initial_window = 65535
        self.max_frame = 16384
        self.windows: dict[int, int] = {}
        self.sent: dict[int, int] = {}  # stream -> message bytes sent
        self.ended: set[int] = set()
        self._head: dict[int, bytes] = {}  # stream -> its message prefix, not sent yet
        self.next_id = 1
        self._buf = b""
        self.sock.sendall(PREFACE + _frame(SETTINGS, 0, 0))

    def close(self) -> None:
        self.sock.close()

    def open(self, path: str, declared: int) -> int:
        """A new call to path whose message says it is ``declared`` bytes (none sent yet)."""
        sid, self.next_id = self.next_id, self.next_id + 2
        block = b"".join(_literal(k, v) for k, v in (
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", self.authority), ("content-type", "application/grpc"),
            ("te", "trailers")))
        self.sock.sendall(_frame(HEADERS, END_HEADERS, sid, block))
        self.windows[sid] = self.initial_window
        self.sent[sid] = 0
        self._head[sid] = struct.pack("!BI", 0, declared)  # not compressed, its length
        return sid

    def send(self, sid: int, nbytes: int, blocked_s: float = 30.0) -> int:
        """Sends up to nbytes more of sid's message (zeros), as flow control lets it.

        The stream is not ended; sending stops early when the server ended it, or when flow
        control let nothing through for ``blocked_s``. Returns the bytes sent."""
        done = 0
        head = self._head.get(sid, b"")
        blocked = None
        while done < nbytes and sid not in self.ended:
            room = min(self.conn_window, self.windows[sid], self.max_frame)
            if room < len(head) + 1:
                blocked = blocked or time.monotonic()
                if time.monotonic() - blocked > blocked_s:
                    break
                self.pump(0.05)
                continue
            blocked = None
            self._head.pop(sid, None)
            chunk = head + bytes(min(room - len(head), nbytes - done))
            head = b""
            self.sock.sendall(_frame(DATA, 0, sid, chunk))
            self.conn_window -= len(chunk)
            self.windows[sid] -= len(chunk)
            done += len(chunk)
        self.sent[sid] += done
        return done

    def pump(self, seconds: float) -> None:
        """Reads and handles what the server sends for up to ``seconds``."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return
            if not data:
                self.ended.update(self.windows)
                return
            self._buf += data
            self._frames()

    def _frames(self) -> None:
        while len(self._buf) >= 9:
            size = int.from_bytes(self._buf[:3], "big")
            if len(self._buf) < 9 + size:
                return
            kind, flags, sid = struct.unpack("!BBI", self._buf[3:9])
            sid &= 0x7FFFFFFF
            payload, self._buf = self._buf[9:9 + size], self._buf[9 + size:]
            if kind == SETTINGS and not flags & ACK:
                for i in range(0, len(payload) - 5, 6):
                    key, value = struct.unpack("!HI", payload[i:i + 6])
                    if key == INITIAL_WINDOW_SIZE:
                        for s in self.windows:
                            self.windows[s] += value - self.initial_window
                        self.initial_window = value
                    elif key == MAX_FRAME_SIZE:
                        self.max_frame = value
                self.sock.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == WINDOW_UPDATE:
                inc = struct.unpack("!I", payload)[0] & 0x7FFFFFFF
                if sid == 0:
                    self.conn_window += inc
                elif sid in self.windows:
                    self.windows[sid] += inc
            elif kind == PING and not flags & ACK:
                self.sock.sendall(_frame(PING, ACK, 0, payload))
            elif (kind == HEADERS and flags & END_STREAM) or kind == RST_STREAM:
                self.ended.add(sid)
            elif kind == GOAWAY:
                self.ended.update(self.windows)
