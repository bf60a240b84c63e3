"""The server's RDMA lane when starting it fails in ways the exporter does not type (a raw NIXL
error, a preflight that prints garbage) or outlives the server: the lane must end down with a
counted reason, never stuck in "starting", and close() must not wait for a start in progress.
NIXL is replaced by fakes here, so these run without it."""

from __future__ import annotations

import subprocess
import threading
import time
import types

import numpy as np
import pytest

pytest.importorskip("grpc")

from smg_fast.client import Client  # noqa: E402
from smg_fast.rdma import preflight  # noqa: E402
from smg_fast.server import rdma_lane  # noqa: E402
from smg_fast.server.config import ServerConfig  # noqa: E402


def _wait(pred, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _raw_nixl_error(monkeypatch):
    """Preflight passes, then the exporter dies with an exception NIXL raises untyped (as
    get_agent_metadata does)."""
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
