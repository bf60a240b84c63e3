"""The exporter's metadata service.

Hands its NIXL agent metadata to pullers that connect to the listening socket, driven by the
exporter's selector loop."""

from __future__ import annotations

import collections
import logging
import selectors
import socket

from .nixl import MAGIC

log = logging.getLogger("smg_fast.rdma")

# Metadata connections are served by the exporter's own selector loop, never by blocking reads:
# each has an absolute deadline, and when a cap is reached the oldest connection is closed to make
# room, so idle or slow peers can delay a new puller by at most one deadline, never lock it out.
MAX_METADATA_CONNECTIONS = 64
MAX_METADATA_PER_PEER = 8


class _MetaConn:
    __slots__ = ("sock", "peer", "deadline", "got", "out", "open")

    def __init__(self, sock: socket.socket, peer: str, deadline: float) -> None:
        self.sock = sock
        self.peer = peer
        self.deadline = deadline
        self.got = bytearray()
        self.out: memoryview | None = None
        self.open = True

    @property
    def idle(self) -> bool:
        """Has sent nothing yet (a connect flood's connections stay like this)."""
        return not self.got and self.out is None


class MetadataServer:
    """Answers metadata requests on a non-blocking listening socket.

    Its owner's selector loop drives it (``handle`` once per select). Never blocks on a peer: each
    connection has an absolute deadline, and when a cap is reached a connection is closed to make
    room, so idle or slow peers can delay a new puller by at most one deadline, never lock it out.

    Connections are tracked by identity, never by file descriptor: closing one to make room
    frees its fd number, which the next accept in the same batch may get, while the batch still
    holds the closed connection's event."""

    def __init__(self, sock: socket.socket, sel: selectors.BaseSelector, answer: bytes,
                 timeout_s: float, counters: dict[str, int]) -> None:
        self.sock = sock
        self.sel = sel
        self.answer = answer
        self.timeout_s = timeout_s
        self.counters = counters
        self.conns: collections.OrderedDict[_MetaConn, None] = collections.OrderedDict()
        sel.register(sock, selectors.EVENT_READ, self)

    def handle(self, ready: list[tuple[selectors.SelectorKey, int]], now: float) -> None:
        """Processes one select() batch.

        Connections first (a request already sent is answered before any eviction), then new
        connections, then deadlines."""
        accept = False
        for sk, events in ready:
            if sk.data is self:
                accept = True
            elif isinstance(sk.data, _MetaConn):
                if sk.data.open and sk.data in self.conns:  # else closed earlier in this batch
                    self.serve(sk.data, events)
        if accept:
            self.accept(now)
        self.expire(now)

    def accept(self, now: float) -> None:
        """Takes every pending connection.

        A full table (total, or this peer's share) first advances the connections that may hold a
        request, then closes one that has sent nothing (the oldest), else the oldest; never the new
        one."""
        while True:
            try:
                sock, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.debug("rdma metadata accept failed: %s", exc)
                return
            sock.setblocking(False)
            peer = addr[0] if isinstance(addr, tuple) else str(addr)
            self._make_room(peer)
            conn = _MetaConn(sock, peer, now + self.timeout_s)
            self.conns[conn] = None
            self.sel.register(sock, selectors.EVENT_READ, conn)

    def _make_room(self, peer: str) -> None:
        crowd = self._crowd(peer)
        if not crowd:
            return
        for conn in crowd:  # a puller's request may be waiting unread: answer it instead
            if conn.idle:
                self.serve(conn, selectors.EVENT_READ)
        crowd = self._crowd(peer)
        if crowd:
            self.drop(next((c for c in crowd if c.idle), crowd[0]))

    def _crowd(self, peer: str) -> list[_MetaConn]:
        """The connections one of which must go before peer's new one fits.

        Oldest first; none when it fits."""
        mine = [c for c in self.conns if c.peer == peer]
        if len(mine) >= MAX_METADATA_PER_PEER:
            return mine
        if len(self.conns) >= MAX_METADATA_CONNECTIONS:
            return list(self.conns)
        return []

    def serve(self, conn: _MetaConn, events: int) -> None:
        """Advances one connection without blocking: read MAGIC, then send the answer."""
        try:
            if conn.out is None and events & selectors.EVENT_READ:
                chunk = conn.sock.recv(len(MAGIC) - len(conn.got))
                if not chunk:
                    self.drop(conn)
                    return
                conn.got += chunk
                if not MAGIC.startswith(bytes(conn.got)):
                    self.drop(conn)
                    return
                if len(conn.got) == len(MAGIC):
                    conn.out = memoryview(self.answer)
                    self.sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
            if conn.out is not None:
                sent = conn.sock.send(conn.out)
                conn.out = conn.out[sent:]
                if not conn.out:
                    self.counters["metadata_served"] += 1
                    self.drop(conn, counted=False)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            log.debug("rdma metadata request failed: %s", exc)
            self.drop(conn)

    def expire(self, now: float) -> None:
        while self.conns:
            oldest = next(iter(self.conns))  # deadlines grow with insertion order
            if oldest.deadline > now:
                return
            self.drop(oldest)

    def drop(self, conn: _MetaConn, counted: bool = True) -> None:
        if conn not in self.conns:
            return  # already dropped
        del self.conns[conn]
        conn.open = False
        if counted:
            self.counters["metadata_dropped"] += 1
        # Unregister through the selector's own map, and only this connection's entry: its fd
        # number may already belong to another connection.
        key = self.sel.get_map().get(conn.sock.fileno()) if conn.sock.fileno() >= 0 else None
        if key is not None and key.data is conn:
            self.sel.unregister(key.fileobj)
        conn.sock.close()

    def close(self) -> None:
        for conn in list(self.conns):
            self.drop(conn, counted=False)
        try:
            self.sel.unregister(self.sock)
        except (KeyError, ValueError):
            pass


__all__ = ["MAX_METADATA_CONNECTIONS", "MAX_METADATA_PER_PEER", "MetadataServer"]
