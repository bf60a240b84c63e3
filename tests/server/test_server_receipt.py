"""Receipt: what gRPC buffers for calls whose message is still arriving, bounded per connection.

A slow client (a raw HTTP/2 connection on 127.0.0.1 that sends part of several large messages and
stalls) gets at most --max-receiving-per-connection calls reading at once, the rest waiting with
no more than a stream window taken, all cut after --receive-timeout-s, so the server's memory
stays bounded; a second tenant on its own connection is served, exactly, meanwhile. Waiting calls
are served in turn; statuses as a gRPC client sees them."""

from __future__ import annotations

import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest
from support.slow_http2 import SlowClient

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast._service.grpc_server import STREAM_WINDOW_BYTES
from smg_fast.client import Client, build_request
from smg_fast.testing.servers import RouterProcess, ServerProcess, free_port
from smg_fast.transport.tensors import read_tensor

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
                         "--max-receiving-per-connection", "2", "--receive-timeout-s", "10"])
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
            for sid in calls:  # up to 24 MiB of each 100 MiB message, then nothing more
                slow.send(sid, 24 * MiB, blocked_s=0.3)
            slow.pump(0.3)
            assert not slow.ended
            reading, waiting = calls[:2], calls[2:]
            assert all(slow.sent[sid] == 24 * MiB for sid in reading), slow.sent
            # the others wait for a place, their stream windows full: 256 KiB taken of each
            assert all(slow.sent[sid] <= STREAM_WINDOW_BYTES + 5 for sid in waiting), slow.sent
            held = _rss(srv.pid) - base
            # the second tenant, on its own connection, is served while the slow one stalls
            for _ in range(3):
                out = other.preprocess(jpeg, transport="inline")
                assert np.array_equal(out.pixel_values, want)
            assert time.monotonic() - started < 10 and not slow.ended
            # the stalled calls are cut at the timeout, and what they held is dropped
            deadline = time.monotonic() + 30
            while not all(sid in slow.ended for sid in calls):
                assert time.monotonic() < deadline, "the stalled calls were never cut"
                slow.pump(0.1)
            assert time.monotonic() - started >= 10 - 0.5
            out = other.preprocess(jpeg, transport="inline")
            assert np.array_equal(out.pixel_values, want)
        # 2 x 24 MiB and 4 windows held (6 x 24 MiB without the bound), not 6 x 100 MiB
        assert held < 80 * MiB, f"RSS grew {held / MiB:.0f} MiB while the client stalled"
        assert srv.proc.poll() is None
    finally:
        if slow is not None:
            slow.close()
        srv.stop(timeout=30)


def test_many_connections_share_one_bound(track_pid, small_jpegs, ours):
    """Connections are not bounded, calls receiving are, across them (--max-receiving).

    Six raw connections each send part of two large messages and stall: three calls in all read
    theirs, every other one waits with a window taken, so memory grows by three partial messages,
    not twelve. A tenant arriving meanwhile waits its turn (in order), and is served exactly once
    the stalled calls are cut at --receive-timeout-s."""
    srv = ServerProcess(["--workers", "2", "--max-message-mb", "128",
                         "--max-receiving-per-connection", "2", "--max-receiving", "3",
                         "--receive-timeout-s", "8"])
    track_pid(srv.pid)
    slows: list[SlowClient] = []
    try:
        srv.wait()
        jpeg = small_jpegs["china"]
        want = ours("qwen2_vl")(jpeg)["pixel_values"]
        with Client(srv.target, timeout=60) as other:
            other.preprocess(jpeg, transport="inline")  # warm: pools and pages in place
            base = _rss(srv.pid)
            calls = []
            for _ in range(6):
                slow = SlowClient("127.0.0.1", srv.port)
                slows.append(slow)
                calls += [(slow, slow.open(PREPROCESS, 100 * MiB)) for _ in range(2)]
            started = time.monotonic()
            for slow, sid in calls:
                slow.send(sid, 24 * MiB, blocked_s=0.3)
            for slow in slows:
                slow.pump(0.1)
            sent = sorted(slow.sent[sid] for slow, sid in calls)
            assert sent[-3:] == [24 * MiB] * 3, sent
            assert all(n <= STREAM_WINDOW_BYTES + 5 for n in sent[:-3]), sent
            held = _rss(srv.pid) - base
            out = other.preprocess(jpeg, transport="inline")  # waits for a place: served
            assert np.array_equal(out.pixel_values, want)
            assert time.monotonic() - started >= 8 - 1
        assert held < 120 * MiB, f"RSS grew {held / MiB:.0f} MiB while the clients stalled"
        assert srv.proc.poll() is None
    finally:
        for slow in slows:
            slow.close()
        srv.stop(timeout=30)


def _window_taken(slow: SlowClient) -> tuple[int, int]:
    """Sent bytes of two 16 MiB calls on one connection with one place to receive.

    8 MiB offered to each: (what the reading call sent, what the waiting one could)."""
    reading, waiting = (slow.open(PREPROCESS, 16 * MiB) for _ in range(2))
    slow.send(reading, 8 * MiB, blocked_s=0.5)
    slow.send(waiting, 8 * MiB, blocked_s=0.5)
    return slow.sent[reading], slow.sent[waiting]


def test_stream_window_flag_sets_what_a_waiting_call_takes(start_server, track_pid):
    """--stream-window-kb is the HTTP/2 window of a call's stream, on the server and the router.

    A waiting call takes that much of its message, no more (the default 256 KiB less); the
    router's stalled calls are cut at its --receive-timeout-s and counted in its metrics."""
    srv = start_server(max_receiving_per_connection=1, stream_window_kb=1024,
                       receive_timeout_s=5.0)
    slow = SlowClient("127.0.0.1", srv.port)
    try:
        read, waited = _window_taken(slow)
    finally:
        slow.close()
    assert read == 8 * MiB
    assert STREAM_WINDOW_BYTES < waited <= MiB + 5, waited
    metrics = free_port()
    router = RouterProcess([srv.target], ["--max-receiving-per-connection", "1",
                                          "--stream-window-kb", "1024",
                                          "--receive-timeout-s", "3",
                                          "--metrics-port", str(metrics)])
    track_pid(router.pid)
    slow = None
    try:
        router.wait()
        slow = SlowClient("127.0.0.1", router.port)
        read, waited = _window_taken(slow)
        assert read == 8 * MiB
        assert STREAM_WINDOW_BYTES < waited <= MiB + 5, waited
        text = ""
        deadline = time.monotonic() + 30
        while "smg_fast_receipt_timed_out_total 2.0" not in text:
            assert time.monotonic() < deadline, text
            slow.pump(0.2)
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as r:
                text = r.read().decode()
        assert "smg_fast_receipt_queued_total 1.0" in text
        assert "# TYPE smg_fast_receipt_queued_total counter" in text
    finally:
        if slow is not None:
            slow.close()
        router.stop(timeout=30)


def _never(release: threading.Event, message: bytes | None = None):
    """A request stream that sends nothing until release is set (then message, if any)."""
    release.wait(60)
    if message is not None:
        yield message


def test_waiting_calls_are_served_in_turn_or_cut_at_the_timeout(start_server, small_jpegs,
                                                                ours):
    """On one connection (a gRPC client, one channel) with one place to receive.

    A call whose message has not come holds the place; a second waits, unread, and is served
    exactly once the first's message comes; stalled ones are cut at --receive-timeout-s,
    RESOURCE_EXHAUSTED naming it. Another connection is served meanwhile."""
    srv = start_server(max_receiving_per_connection=1, receive_timeout_s=3.0)
    receipt = srv.server.receipt
    jpegs = [small_jpegs["flower"], small_jpegs["china"]]
    wants = [ours("qwen2_vl")(j)["pixel_values"] for j in jpegs]
    reqs = [build_request(j, transport="inline").SerializeToString() for j in jpegs]
    channel = grpc.insecure_channel(srv.target,
                                    options=[("grpc.use_local_subchannel_pool", 1)])
    go = threading.Event()
    try:
        call = channel.stream_unary(PREPROCESS)
        first = call.future(_never(go, reqs[0]), timeout=30)
        _until(lambda: receipt.stats()["receiving"] == 1, "the first call was not taken")
        second = channel.unary_unary(PREPROCESS).future(reqs[1], timeout=30)
        _until(lambda: receipt.stats()["waiting"] == 1, "the second call did not wait")
        with Client(srv.target, timeout=30) as other:  # its own connection: not held up
            out = other.preprocess(jpegs[0], transport="inline")
        assert np.array_equal(out.pixel_values, wants[0])
        assert not second.done()
        go.set()  # the first's message comes: it is served, then the second
        for fut, want in zip((first, second), wants, strict=True):
            got = pb.PreprocessResponse.FromString(fut.result(timeout=30))
            assert np.array_equal(read_tensor(got.items[0].pixel_values), want)
        assert receipt.stats()["queued"] == 1
        # now two that never send: the first is cut at the timeout, the waiting one too
        stall = threading.Event()
        late = [call.future(_never(stall), timeout=30) for _ in range(2)]
        for fut in late:
            with pytest.raises(grpc.RpcError) as err:
                fut.result(timeout=30)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--receive-timeout-s" in err.value.details()
        stall.set()
    finally:
        go.set()
        channel.close()
    assert receipt.stats() == {"receiving": 0, "waiting": 0, "connections": 0, "queued": 2,
                               "timed_out": 2, "max_receiving": receipt.total}
    reg = srv.server.metrics.registry
    assert reg.get_sample_value("smg_fast_receipt_timed_out_total") == 2
    assert reg.get_sample_value("smg_fast_receipt_queued_total") == 2  # a counter, not a gauge


def test_receipt_flags_and_env():
    from smg_fast.server.flags import build_parser, config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.max_receiving_per_connection == 8 and cfg.receive_timeout_s == 60.0
    assert cfg.receiving_limit == max(8, cfg.queued_bytes_limit // cfg.max_message_bytes)
    assert config_from_args(["--max-receiving", "5"], environ={}).receiving_limit == 5
    assert config_from_args([], environ={"SMG_FAST_MAX_RECEIVING": "7"}).max_receiving == 7
    cfg = config_from_args(["--max-receiving-per-connection", "3"],
                           environ={"SMG_FAST_RECEIVE_TIMEOUT_S": "9.5"})
    assert cfg.max_receiving_per_connection == 3 and cfg.receive_timeout_s == 9.5
    for bad in (["--max-receiving-per-connection", "0"], ["--receive-timeout-s", "0"],
                ["--max-receiving", "-1"], ["--stream-window-kb", "8"],
                ["--receive-timeout-s", "nan"]):
        with pytest.raises(SystemExit):
            config_from_args(bad, environ={})
    text = build_parser({}).format_help()
    assert "--max-receiving-per-connection" in text and "SMG_FAST_RECEIVE_TIMEOUT_S" in text
