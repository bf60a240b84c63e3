"""Admission, cancellation, deadlines, drain and error mapping under hostile load.

Cancelled or expired work stops between items, a SIGTERM stop is bounded by the drain timeout,
a flood of big requests is refused with RESOURCE_EXHAUSTED while memory stays bounded, and
failures map to the right status without pinning buffers.
"""

from __future__ import annotations

import concurrent.futures
import io
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.client import Client, build_request  # noqa: E402
from smg_fast.server.cache import COALESCED, MISS, CacheEntry, PixelCache  # noqa: E402
from smg_fast.testing.servers import ServerProcess  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

SMALL_PX = 20_000  # per-request max_pixels: the heavy part of an item is decoding retina.jpg
HEAVY_ITEMS = 200


@pytest.fixture(scope="module")
def retina_dir(tmp_path_factory, real_images):
    d = tmp_path_factory.mktemp("media")
    # 4000x4000 (the photo enlarged): ~25 ms to decode on a fast core, so HEAVY_ITEMS are
    # seconds of work wherever the tests run, well past their sub-second deadlines
    big = real_images.open("retina").convert("RGB").resize((4000, 4000))
    big.save(d / "retina.jpg", "JPEG", quality=90)
    return d


def heavy_request(media_dir, n: int = HEAVY_ITEMS) -> pb.PreprocessRequest:
    """n items naming one big JPEG by file:// URL: a small message, seconds of work."""
    return build_request([f"file://{media_dir}/retina.jpg"] * n, transport="inline",
                         max_pixels=SMALL_PX)


def items_done(srv) -> float:
    """Items the server has finished (its per-item preprocess histogram)."""
    return srv.server.metrics.registry.get_sample_value("smg_fast_preprocess_seconds_count") or 0


def settle(srv, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while srv.server.work_pending:
        assert time.monotonic() < deadline, "work of the call never finished"
        time.sleep(0.02)


@pytest.fixture
def one_worker(start_server, retina_dir):
    srv = start_server(workers=1, allowed_media_dirs=[str(retina_dir)])
    yield srv
    srv.stop(timeout=1.0)


def test_cancelled_call_stops_its_work(one_worker, retina_dir):
    srv = one_worker
    before = items_done(srv)
    with Client(srv.target) as c:
        call = c._stub.Preprocess.future(heavy_request(retina_dir), timeout=300)
        deadline = time.monotonic() + 60
        while items_done(srv) < before + 1:  # cancel mid-loop, after a first item
            assert time.monotonic() < deadline, "work never started"
            time.sleep(0.005)
        call.cancel()
        settle(srv)
    done = items_done(srv) - before
    assert 1 <= done < HEAVY_ITEMS, done
    assert srv.server.admission.stats()["stopped"] >= 1
    assert srv.server.admission.stats()["requests"] == 0


def test_expired_call_stops_its_work_and_queued_work_never_starts(one_worker, retina_dir,
                                                                  small_jpegs, ours):
    srv = one_worker
    before = items_done(srv)
    with Client(srv.target) as c:
        first = c._stub.Preprocess.future(heavy_request(retina_dir), timeout=1.0)
        # queued behind the first on the only worker; its deadline passes while it waits
        queued = c._stub.Preprocess.future(heavy_request(retina_dir), timeout=0.5)
        for call in (first, queued):
            with pytest.raises(grpc.RpcError) as err:
                call.result()
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        settle(srv)
        done = items_done(srv) - before
        assert done < HEAVY_ITEMS, done  # the first stopped; the second did nothing
        assert srv.server.admission.stats()["stopped"] >= 2
        out = c.preprocess(small_jpegs["rocket"], transport="inline")  # still serving
    assert np.array_equal(out.pixel_values, ours("qwen2_vl")(small_jpegs["rocket"])
                          ["pixel_values"])


def test_sigterm_stop_is_bounded_by_the_drain_timeout(retina_dir, track_pid, small_jpegs):
    """Busy with long requests, SIGTERM with --drain-timeout-s 2 exits (rc 0) in well under 2 + 8 s.

    The cut requests get UNAVAILABLE (retry elsewhere), never CANCELLED."""
    srv = ServerProcess(["--workers", "2", "--drain-timeout-s", "2",
                         "--allowed-media-dir", str(retina_dir)])
    proc, target = srv.proc, srv.target
    track_pid(srv.pid)
    try:
        srv.wait()
        with Client(target) as c:
            calls = [c._stub.Preprocess.future(heavy_request(retina_dir, 250), timeout=300)
                     for _ in range(3)]
            time.sleep(1.0)  # the workers are inside the item loops
            assert not any(call.done() for call in calls)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            # a request arriving while the server drains (health says so) is UNAVAILABLE
            while c.health(timeout=10) == "SERVING":
                time.sleep(0.01)
            with pytest.raises(grpc.RpcError) as late:
                c.preprocess(small_jpegs["rocket"], transport="inline", timeout=10)
            assert late.value.code() == grpc.StatusCode.UNAVAILABLE
            rc = proc.wait(timeout=60)
            took = time.monotonic() - t0
            codes = []
            for call in calls:
                with pytest.raises(grpc.RpcError) as err:
                    call.result(timeout=30)
                codes.append(err.value.code())
        assert rc == 0
        assert took < 2 + 8, f"stop took {took:.1f} s with --drain-timeout-s 2"
        assert codes == [grpc.StatusCode.UNAVAILABLE] * 3, codes
        log = proc.stderr.read()
        assert "stopped" in log and "Traceback" not in log, log
    finally:
        srv.kill()


def _vm(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def test_flood_of_big_requests_is_refused_and_memory_stays_bounded(retina_dir, track_pid,
                                                                   small_jpegs, ours):
    """12 concurrent 80 MB requests against 3 admitted / 100 MiB.

    Some are refused RESOURCE_EXHAUSTED (saying to back off), every other one is exact, and the
    server's peak RSS grows by far less than the ~1 GB of the flood. (A served request holds about 3
    copies of its message while it runs, and a message being received 2: hence the bound's size.)"""
    pad = 80 << 20
    big = small_jpegs["chelsea"] + bytes(pad)  # trailing bytes after EOI: decoders ignore them
    slow = [f"file://{retina_dir}/retina.jpg"] * 60  # about 2 s of work per request
    ref_small = ours("qwen2_vl", max_pixels=SMALL_PX)
    retina = ref_small((retina_dir / "retina.jpg").read_bytes())["pixel_values"]
    want = np.concatenate([ref_small(small_jpegs["chelsea"])["pixel_values"]] + [retina] * 60)
    srv = ServerProcess(["--workers", "1", "--allowed-media-dir", str(retina_dir),
                         "--pixel-cache-mb", "0"],
                        env={"SMG_FAST_MAX_QUEUED_REQUESTS": "3", "SMG_FAST_MAX_QUEUED_MB": "100"})
    proc, target = srv.proc, srv.target
    track_pid(srv.pid)
    try:
        srv.wait()
        with Client(target, timeout=120) as c:  # the baseline: the peak of one request alone
            c.preprocess([big] + slow, transport="inline", max_pixels=SMALL_PX)
        base = _vm(proc.pid, "VmHWM")

        def call(i: int):
            time.sleep(0.5 * i)  # staggered: each arrives while the first ones still run
            with Client(target, timeout=120) as c:
                try:
                    return c.preprocess([big] + slow, transport="inline", max_pixels=SMALL_PX)
                except grpc.RpcError as exc:
                    return exc

        with concurrent.futures.ThreadPoolExecutor(12) as ex:
            results = list(ex.map(call, range(12)))
        peak = _vm(proc.pid, "VmHWM")
        refused = [r for r in results if isinstance(r, grpc.RpcError)]
        served = [r for r in results if not isinstance(r, grpc.RpcError)]
        assert refused and served
        for r in refused:
            assert r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, r
            assert "retry with backoff" in r.details()
        for r in served:
            assert np.array_equal(r.pixel_values, want)
        assert peak - base < 640 << 20, f"peak RSS grew {(peak - base) >> 20} MiB"
    finally:
        srv.stop(timeout=30)


def _png(size) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, 90).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("cache_mb", [0, 32])
def test_numeric_fields_and_memory_map_to_client_statuses(start_server, cache_mb):
    """Absurd numeric ranges get a client error status, never INTERNAL.

    min = max = 2**63 and other absurd ranges are INVALID_ARGUMENT or RESOURCE_EXHAUSTED on every
    transport."""
    srv = start_server(pixel_cache_mb=cache_mb)
    tiny = _png((8, 8))
    ok = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
    with Client(srv.target, timeout=30) as c:
        for transport in ("inline", "shm", "auto"):
            for v in (2**63, 2**62, 10**12):
                with pytest.raises(grpc.RpcError) as err:
                    c.preprocess(tiny, transport=transport, min_pixels=v, max_pixels=v)
                assert err.value.code() in ok, (transport, v, err.value.details())
        with pytest.raises(grpc.RpcError) as err:
            c.preprocess(tiny, transport="inline", min_pixels=2**63, max_pixels=2**63)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("cache_mb", [0, 256])
def test_failed_requests_leave_nothing_alive(start_server, real_images, cache_mb):
    """A failed request frees the output it already built at once.

    The request fails after an earlier item's output was built (item 1 is a truncated JPEG: its
    header plans fine, its decode fails); that output is freed with no garbage collection: nothing
    keeps it alive through the exception's traceback. (tracemalloc sees Python objects such as the
    response under construction; a cache entry lives in the native pools and is not counted.)"""
    import tracemalloc

    srv = start_server(pixel_cache_mb=cache_mb, max_message_mb=128)
    tiny = _png((8, 8))
    jpeg = real_images.bytes("rocket")
    truncated = jpeg[: len(jpeg) // 2]
    v = 2_000_000  # item 0: about 48 MB of float32 (x2 temporal), built into the response
    with Client(srv.target, timeout=60) as c:
        c.preprocess(tiny, transport="inline")  # warm-up outside the measurement
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(4):
                with pytest.raises(grpc.RpcError) as err:
                    c.preprocess([tiny, truncated], transport="inline", min_pixels=v,
                                 max_pixels=v)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert err.value.details().startswith("item 1: ")
            settle(srv)
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    assert held < 16 << 20, f"{held >> 20} MiB still referenced after 4 failed requests"


def test_stop_never_blocks_on_a_stuck_close(start_server):
    """Closing the RDMA lane (or the registry, or metrics) runs off the event loop and is bounded.

    A close that hangs does not hold the stop past the drain timeout + a few s."""
    srv = start_server(drain_timeout_s=0.5)
    release = threading.Event()
    real_close = srv.server.rdma.close

    def stuck_close() -> None:
        release.wait(60)
        real_close()

    srv.server.rdma.close = stuck_close
    try:
        t0 = time.monotonic()
        srv.stop(timeout=0.5)
        took = time.monotonic() - t0
    finally:
        release.set()
    assert took < 0.5 + 8, took


def test_single_flight_waiter_gives_up_on_a_stuck_leader():
    cache = PixelCache(1 << 20)
    stuck, entered = threading.Event(), threading.Event()

    def entry(v: int) -> CacheEntry:
        return CacheEntry(np.full(4, v, np.float32), (1, 2, 2), 1)

    def leader_compute() -> CacheEntry:
        entered.set()
        stuck.wait(60)
        return entry(1)

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        leader = ex.submit(cache.get_or_compute, "k", leader_compute)
        assert entered.wait(30)
        try:
            got, how = cache.get_or_compute("k", lambda: entry(2), 0.2)
            assert how == MISS and np.array_equal(got.pixels, entry(2).pixels)
            assert cache.stats()["takeovers"] == 1
        finally:
            stuck.set()
        assert leader.result(30)[1] == MISS
    # an undisturbed waiter still coalesces
    gate = threading.Event()

    def slow() -> CacheEntry:
        gate.wait(30)
        return entry(3)

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        first = ex.submit(cache.get_or_compute, "j", slow)
        deadline = time.monotonic() + 30
        while cache.stats()["in_flight"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        threading.Timer(0.1, gate.set).start()
        got, how = cache.get_or_compute("j", lambda: entry(4), 30)
        assert how == COALESCED and np.array_equal(got.pixels, entry(3).pixels)
        first.result(30)


def test_admission_flags_and_env():
    from smg_fast.server.flags import build_parser, config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.queued_requests_limit >= 32 and 64 << 20 <= cfg.queued_bytes_limit <= 1 << 30
    cfg = config_from_args(["--max-queued-requests", "5", "--single-flight-wait-s", "2"],
                           environ={"SMG_FAST_MAX_QUEUED_MB": "300"})
    assert cfg.queued_requests_limit == 5 and cfg.queued_bytes_limit == 300 << 20
    assert cfg.single_flight_wait_s == 2.0
    text = build_parser({}).format_help()
    for flag in ("--max-queued-requests", "SMG_FAST_MAX_QUEUED_REQUESTS", "--max-queued-mb",
                 "SMG_FAST_MAX_QUEUED_MB", "--single-flight-wait-s"):
        assert flag in text


def test_waiter_on_a_stuck_leader_is_served(start_server, small_jpegs, ours, monkeypatch):
    """Two requests for one image on a server with the pixel cache.

    The first (the leader) hangs inside its computation; the second does not wait for it past
    --single-flight-wait-s and is served, exactly, by computing the image itself."""
    from smg_fast.server.tensor import Tensor

    srv = start_server(pixel_cache_mb=32, single_flight_wait_s=0.3)
    real_array = Tensor.array
    stuck, entered = threading.Event(), threading.Event()
    first = [True]

    def array(self):  # a cache miss computes here, the JPEG decoded inside or ahead
        if first[0]:
            first[0] = False
            entered.set()
            stuck.wait(60)
        return real_array(self)

    monkeypatch.setattr(Tensor, "array", array)
    img = small_jpegs["flower"]
    try:
        with Client(srv.target, timeout=60) as c:
            leader = c._stub.Preprocess.future(build_request(img, transport="inline"),
                                               timeout=60)
            assert entered.wait(30)
            out = c.preprocess(img, transport="inline", timeout=30)
            assert not leader.done()
            assert np.array_equal(out.pixel_values, ours("qwen2_vl")(img)["pixel_values"])
            assert srv.server.cache.stats()["takeovers"] == 1
            stuck.set()
            leader.result(30)
    finally:
        stuck.set()


def test_idle_streams_do_not_lock_out_health_or_work(start_server, small_jpegs, ours):
    """Many open health Watch streams (from several connections) count as RPCs.

    They must not push health checks, GetModelInfo or Preprocess over any server-wide RPC limit."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    srv = start_server(max_queued_requests=2)  # admission's bound is small on purpose
    # four connections (HTTP/2 also bounds the streams one connection may have open)
    channels = [grpc.insecure_channel(srv.target, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(4)]
    streams = []
    try:
        for ch in channels:
            stub = health_pb2_grpc.HealthStub(ch)
            for _ in range(20):
                stream = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)
                assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
                streams.append(stream)
        with Client(srv.target, timeout=30) as c:
            assert c.health() == "SERVING"
            assert c.model_info()["default_model"] == "qwen2_vl"
            out = c.preprocess(small_jpegs["chelsea"], transport="inline")
            assert np.array_equal(out.pixel_values,
                                  ours("qwen2_vl")(small_jpegs["chelsea"])["pixel_values"])
    finally:
        for stream in streams:
            stream.cancel()
        for ch in channels:
            ch.close()
