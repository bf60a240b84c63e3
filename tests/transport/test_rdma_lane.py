"""The server's RDMA lane ends down with a counted reason however its start fails.

Starting it fails in ways the exporter does not type (a raw NIXL error, a preflight that prints
garbage) or outlives the server: the lane must end down with a counted reason, never stuck in
"starting", and close() must not wait for a start in progress. NIXL is replaced by fakes here, so
these run without it."""

from __future__ import annotations

import subprocess
import threading
import time
import types

import numpy as np
import pytest

pytest.importorskip("grpc")

from smg_fast.client import Client  # noqa: E402
from smg_fast.server import rdma_lane  # noqa: E402
from smg_fast.server.config import ServerConfig  # noqa: E402
from smg_fast.transport.rdma import preflight  # noqa: E402


def _wait(pred, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _raw_nixl_error(monkeypatch):
    """The exporter dies with an untyped NIXL exception after the preflight passes.

    NIXL raises such exceptions untyped, as get_agent_metadata does."""
    monkeypatch.setattr(rdma_lane, "run_preflight", lambda: (None, ""))

    def exporter(**_: object) -> None:
        raise RuntimeError("nixlBackendError: get_agent_metadata failed")

    monkeypatch.setattr(rdma_lane, "Exporter", exporter)


def _garbage_preflight(monkeypatch):
    """The preflight child exits 0 but prints a line that is not JSON."""
    def run(*_: object, **__: object) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess([], 0, stdout='{"ok": tru\n', stderr="")

    monkeypatch.setattr(preflight, "subprocess", types.SimpleNamespace(
        run=run, TimeoutExpired=subprocess.TimeoutExpired))


@pytest.mark.parametrize("breakage", [_raw_nixl_error, _garbage_preflight])
def test_failed_start_marks_the_lane_down(breakage, monkeypatch, start_server, small_jpegs,
                                          ours):
    breakage(monkeypatch)
    srv = start_server()  # shm default: the lane starts on the first rdma request
    reg = srv.server.metrics.registry
    lane = srv.server.rdma
    with Client(srv.target, timeout=30) as c:
        first = c.preprocess(small_jpegs["rocket"], transport="rdma")
        assert first.items[0].transport == "shm"
        assert _wait(lambda: lane.state != "starting")
        assert (lane.state, lane.reason, lane.ready) == ("unavailable", "agent_failed", False)
        out = c.preprocess(small_jpegs["rocket"], transport="rdma")
    assert out.items[0].transport == "shm"
    assert np.array_equal(out.pixel_values, ours("qwen2_vl")(small_jpegs["rocket"])["pixel_values"])
    assert reg.get_sample_value("smg_fast_fallback_total",
                                {"reason": "agent_failed", "used": "shm"}) >= 1
    closer = threading.Thread(target=lane.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive()


def test_close_during_start_does_not_wait_and_closes_the_late_exporter(monkeypatch):
    gate = threading.Event()
    made = []

    class FakeExporter:
        def __init__(self, **_: object) -> None:
            self.closed = False
            made.append(self)

        def close(self) -> None:
            self.closed = True

    def slow_preflight() -> tuple[None, str]:
        gate.wait(60)
        return None, ""

    monkeypatch.setattr(rdma_lane, "run_preflight", slow_preflight)
    monkeypatch.setattr(rdma_lane, "Exporter", FakeExporter)
    lane = rdma_lane.RdmaLane(ServerConfig())
    lane.start_background()
    assert _wait(lambda: lane.state == "starting")
    closer = threading.Thread(target=lane.close)  # what stop() does on the event loop
    closer.start()
    closer.join(10)
    try:
        assert not closer.is_alive() and lane.state == "starting"
    finally:
        gate.set()
    assert lane._started.wait(30)
    assert len(made) == 1 and made[0].closed  # the start that finished late cleaned up
    assert not lane.ready and lane.state == "unavailable"
    closer.join(150)


# ---- the exporter's metadata endpoint (no NIXL: MetadataServer on its own) ----

import selectors  # noqa: E402
import socket  # noqa: E402

from smg_fast.transport.rdma.metadata_server import MAX_METADATA_PER_PEER, MetadataServer  # noqa: E402
from smg_fast.transport.rdma.nixl import MAGIC  # noqa: E402

ANSWER = MAGIC + b"\x00" * 8 + b"metadata answer"


@pytest.fixture
def meta():
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    counters = {"metadata_served": 0, "metadata_dropped": 0}
    srv = MetadataServer(lsock, sel, ANSWER, 2.0, counters)
    clients: list[socket.socket] = []

    def connect(n: int) -> list[socket.socket]:
        new = [socket.create_connection(lsock.getsockname(), timeout=5) for _ in range(n)]
        clients.extend(new)
        return new

    srv.connect = connect
    srv.clients = clients
    try:
        yield srv
    finally:
        srv.close()
        sel.close()
        lsock.close()
        for c in clients:
            c.close()


def _ready(srv: MetadataServer, n: int) -> list:
    """One select() batch once at least n connections are readable (bounded wait)."""
    for _ in range(500):
        ready = srv.sel.select(0.01)
        if sum(k.data is not srv and k.data is not None for k, _ in ready) >= n:
            return ready
    raise AssertionError(f"fewer than {n} connections became readable")


def _consistent(srv: MetadataServer) -> None:
    """Asserts that the selector's registrations and the tracked connections match.

    Every selector registration is a tracked, open connection (or the listener), and every tracked
    connection is registered: nothing is left registered that nobody will close."""
    registered = [k for k in srv.sel.get_map().values() if k.data is not srv]
    assert {id(k.data) for k in registered} == {id(c) for c in srv.conns}
    assert len(registered) == len(srv.conns)
    for k in registered:
        assert k.data.open and k.fileobj is k.data.sock and k.fileobj.fileno() == k.fd


def test_a_connection_closed_to_make_room_never_hits_its_fd_successor(meta):
    """The cap closes the oldest connection while this select() batch still holds its event.

    The next accept gets its fd number. The stale event must not touch the new connection (it used
    to: dropped from the table while still registered for EVENT_WRITE, a 100% CPU spin)."""
    first = meta.connect(MAX_METADATA_PER_PEER)
    meta.accept(0.0)
    oldest = next(iter(meta.conns))
    for c in first:
        c.send(MAGIC[:1])  # every one has spoken: the oldest is the one that goes
    batch = _ready(meta, MAX_METADATA_PER_PEER)
    old_fd = oldest.sock.fileno()
    meta.connect(2)
    meta.accept(0.0)  # closes the two oldest; the second new socket reuses the first's fd
    assert not oldest.open and oldest not in meta.conns
    reused = [c for c in meta.conns if c.sock.fileno() == old_fd]
    _consistent(meta)
    meta.handle(batch, 0.0)  # the batch from before the evictions, stale events included
    _consistent(meta)
    assert all(c.open for c in reused)
    # Every live client completes its request; then nothing is left registered or ready.
    tracked = {c.sock.getpeername() for c in meta.conns}
    live = [c for c in meta.clients if c.getsockname() in tracked]
    for c in live:
        c.send(MAGIC[1:] if c in first else MAGIC)
    for _ in range(500):
        if not meta.conns:
            break
        meta.handle(meta.sel.select(0.01), 0.0)
    assert not meta.conns
    _consistent(meta)
    assert meta.sel.select(0) == []  # no ready-forever socket
    for c in live:
        got = b""
        while len(got) < len(ANSWER):
            chunk = c.recv(4096)
            assert chunk
            got += chunk
        assert got == ANSWER
    assert meta.counters["metadata_served"] == len(live) == MAX_METADATA_PER_PEER


def test_a_connect_flood_does_not_evict_a_request_waiting_to_be_read(meta):
    """All local pullers share 127.0.0.1.

    A puller whose request is already sent, followed by a burst of idle connects in the same accept
    batch, is answered, not closed to make room."""
    meta.connect(MAX_METADATA_PER_PEER)
    meta.accept(0.0)
    (puller,) = meta.connect(1)
    puller.sendall(MAGIC)
    meta.connect(2 * MAX_METADATA_PER_PEER)  # all pending at once: one accept() call takes them
    meta.accept(0.0)
    got = b""
    while len(got) < len(ANSWER):
        chunk = puller.recv(4096)
        assert chunk, "the puller's connection was closed to make room"
        got += chunk
    assert got == ANSWER and meta.counters["metadata_served"] == 1
    assert len(meta.conns) == MAX_METADATA_PER_PEER
    _consistent(meta)


def test_expired_connections_are_closed_and_unregistered(meta):
    meta.connect(3)
    meta.accept(0.0)
    assert len(meta.conns) == 3
    meta.handle([], 10.0)  # past every deadline
    assert not meta.conns and meta.counters["metadata_dropped"] == 3
    _consistent(meta)


def test_rdma_and_scratch_event_counts_are_exported_as_counters():
    from prometheus_client import generate_latest

    from smg_fast.server.metrics import Metrics

    names = ("refused_free", "bad_notifications", "metadata_served", "metadata_dropped")
    m = Metrics({"rdma": lambda: dict.fromkeys(names, 3),
                 "scratch": lambda: {"remote_gives": 5}})
    text = generate_latest(m.registry).decode()
    for name in [f"rdma_{n}" for n in names]:  # a gauge has neither the type nor the suffix
        assert f"# TYPE smg_fast_{name}_total counter" in text, name
        assert f"\nsmg_fast_{name}_total 3.0\n" in text, name
    assert "\nsmg_fast_scratch_remote_gives_total 5.0\n" in text
