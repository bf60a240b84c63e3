"""Receipt: what gRPC buffers for calls whose message is still arriving, bounded per connection.

A slow client (a raw HTTP/2 connection on 127.0.0.1 that sends part of several large messages and
stalls) gets at most --max-receiving-per-connection calls receiving at once, the rest refused
unread, and those are cut after --receive-timeout-s, so the server's memory stays bounded; a
second tenant on its own connection is served, exactly, meanwhile. The statuses, as a gRPC client
sees them, from calls whose message never comes."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from support.slow_http2 import SlowClient

from smg_fast.client import Client
from smg_fast.testing.servers import ServerProcess

PREPROCESS = "/smg_fast.v1.Preprocessor/Preprocess"
MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _until(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_stalled_client_holds_a_bounded_buffer_and_others_are_served(track_pid, small_jpegs,
                                                                       ours):
    srv = ServerProcess(["--workers", "2", "--max-message-mb", "128",
                         "--max-receiving-per-connection", "2", "--receive-timeout-s", "6"])
    track_pid(srv.pid)
    slow = None
    try:
        srv.wait()
        jpeg = small_jpegs["china"]
        want = ours("qwen2_vl")(jpeg)["pixel_values"]
        with Client(srv.target, timeout=30) as other:
            other.preprocess(jpeg, transport="inline")  # warm: pools and pages in place
            base = _rss(srv.pid)
            slow = SlowClient("127.0.0.1", srv.port)
            calls = [slow.open(PREPROCESS, 100 * MiB) for _ in range(6)]
            started = time.monotonic()
            for sid in calls:  # 24 MiB of each 100 MiB message, then nothing more
                slow.send(sid, 24 * MiB)
            slow.pump(0.5)
            receiving = [sid for sid in calls if sid not in slow.ended]
            assert len(receiving) == 2, (receiving, slow.sent)  # the others were refused
            assert all(slow.sent[sid] == 24 * MiB for sid in receiving)
            refused = [sid for sid in calls if sid in slow.ended]
            assert all(slow.sent[sid] < 24 * MiB for sid in refused), slow.sent
            held = _rss(srv.pid) - base
            # the second tenant, on its own connection, is served while the slow one stalls
            for _ in range(3):
                out = other.preprocess(jpeg, transport="inline")
                assert np.array_equal(out.pixel_values, want)
            assert time.monotonic() - started < 6  # (all of that inside the receive timeout)
            assert not any(sid in slow.ended for sid in receiving)
            # the stalled calls are cut at the timeout, and what they held is dropped
            deadline = time.monotonic() + 30
            while not all(sid in slow.ended for sid in calls):
                assert time.monotonic() < deadline, "the stalled calls were never cut"
                slow.pump(0.1)
            assert time.monotonic() - started >= 6 - 0.5
            out = other.preprocess(jpeg, transport="inline")
            assert np.array_equal(out.pixel_values, want)
        # 2 x 24 MiB received and held (6 x 24 MiB without the bound), nothing like 6 x 100 MiB
        assert held < 80 * MiB, f"RSS grew {held / MiB:.0f} MiB while the client stalled"
        assert srv.proc.poll() is None
    finally:
        if slow is not None:
            slow.close()
        srv.stop(timeout=30)


def test_statuses_of_refused_and_late_calls(start_server, small_jpegs, ours):
    """Calls whose message never comes, from a gRPC client.

    The third on one connection is refused at once, the first two cut at the timeout, both
    RESOURCE_EXHAUSTED naming the flag. Another connection is served meanwhile."""
    srv = start_server(max_receiving_per_connection=2, receive_timeout_s=2.0)
    never = threading.Event()

    def nothing():
        never.wait(60)
        return
        yield  # a request stream that sends no message

    channel = grpc.insecure_channel(srv.target,
                                    options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        call = channel.stream_unary(PREPROCESS)
        first = [call.future(nothing(), timeout=30) for _ in range(2)]
        _until(lambda: srv.server.receipt.stats()["receiving"] == 2, "calls were not taken")
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            call(nothing(), timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--max-receiving-per-connection" in err.value.details()
        assert time.monotonic() - t0 < 2.0
        jpeg = small_jpegs["flower"]
        with Client(srv.target, timeout=30) as other:
            out = other.preprocess(jpeg, transport="inline")
        assert np.array_equal(out.pixel_values, ours("qwen2_vl")(jpeg)["pixel_values"])
        for f in first:
            with pytest.raises(grpc.RpcError) as err:
                f.result(timeout=30)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--receive-timeout-s" in err.value.details()
    finally:
        never.set()
        channel.close()
    stats = srv.server.receipt.stats()
    assert stats == {"receiving": 0, "connections": 0, "refused": 1, "timed_out": 2}
    reg = srv.server.metrics.registry
    assert reg.get_sample_value("smg_fast_receipt_timed_out_total") == 2


def test_receipt_flags_and_env():
    from smg_fast.server.flags import build_parser, config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.max_receiving_per_connection == 8 and cfg.receive_timeout_s == 60.0
    cfg = config_from_args(["--max-receiving-per-connection", "3"],
                           environ={"SMG_FAST_RECEIVE_TIMEOUT_S": "9.5"})
    assert cfg.max_receiving_per_connection == 3 and cfg.receive_timeout_s == 9.5
    for bad in (["--max-receiving-per-connection", "0"], ["--receive-timeout-s", "0"],
                ["--receive-timeout-s", "nan"]):
        with pytest.raises(SystemExit):
            config_from_args(bad, environ={})
    text = build_parser({}).format_help()
    assert "--max-receiving-per-connection" in text and "SMG_FAST_RECEIVE_TIMEOUT_S" in text
