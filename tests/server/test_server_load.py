"""Concurrency.

32 clients x 200 requests without an error, exact results throughout; concurrent identical requests
compute once (single flight)."""

from __future__ import annotations

import concurrent.futures
import threading

import numpy as np
import pytest

pytest.importorskip("grpc")

from smg_fast.client import Client  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

CLIENTS = 32
REQUESTS = 200
TRANSPORTS = ("inline", "shm", "auto")
DTYPES = ("float32", "bfloat16")


def test_32_clients_x_200_requests(start_server, small_jpegs, ours):
    # A 1 MiB cache under a ~3 MiB working set: hits, misses, coalesced waits and evictions
    # all happen, concurrently.
    srv = start_server(pixel_cache_mb=1, workers=2)
    names = sorted(small_jpegs)
    proc = ours("qwen2_vl")
    refs = {(n, d): proc(small_jpegs[n], dtype=d)["pixel_values"] for n in names for d in DTYPES}
    errors: list[str] = []
    done = [0]
    lock = threading.Lock()

    def run(k: int) -> None:
        with Client(srv.target, timeout=60) as c:
            for r in range(REQUESTS):
                name = names[(k + r) % len(names)]
                dtype = DTYPES[(k + r // 3) % 2]
                transport = TRANSPORTS[(k + r) % 3]
                try:
                    out = c.preprocess(small_jpegs[name], dtype=dtype, transport=transport)
                    if not np.array_equal(out.pixel_values, refs[name, dtype]):
                        errors.append(f"client {k} request {r}: wrong pixel_values")
                except Exception as exc:  # report every failure, keep going
                    errors.append(f"client {k} request {r}: {exc!r}")
                with lock:
                    done[0] += 1

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as ex:
        list(ex.map(run, range(CLIENTS)))
    assert not errors, errors[:5]
    assert done[0] == CLIENTS * REQUESTS
    s = srv.server.cache.stats()
    assert s["hits"] + s["misses"] + s["coalesced"] == CLIENTS * REQUESTS
    assert s["misses"] > 0 and s["hits"] > 0 and s["evictions"] > 0
    assert s["bytes"] <= 1 << 20 and s["in_flight"] == 0
    reg = srv.server.registry
    assert reg.prune() == 0  # every segment was read and unlinked by its client
    assert reg.created > 0 and reg.released == 0
    ok = srv.server.metrics.registry.get_sample_value
    total = sum(ok("smg_fast_requests_total", {"model": "qwen2_vl", "transport": t,
                                               "status": "OK"}) or 0 for t in TRANSPORTS)
    assert total == CLIENTS * REQUESTS
    srv.stop(timeout=2)


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_single_flight_over_grpc(start_server, real_images, ours, transport):
    n = 12
    srv = start_server(pixel_cache_mb=256, workers=8)
    big = real_images.bytes("retina")  # 1411x1411 JPEG: slow enough for the calls to overlap
    ref = ours("qwen2_vl")(big, dtype="bfloat16")["pixel_values"]
    barrier = threading.Barrier(n)

    def call(_):
        with Client(srv.target, timeout=60) as c:
            c.health()  # connected before the barrier
            barrier.wait()
            return c.preprocess(big, dtype="bfloat16", transport=transport)

    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        outs = list(ex.map(call, range(n)))
    for out in outs:
        assert np.array_equal(out.pixel_values, ref)
    s = srv.server.cache.stats()
    print(f"single flight: {s}")
    assert s["misses"] == 1  # one computation
    assert s["hits"] + s["coalesced"] == n - 1
    assert sum(not o.items[0].cache_hit for o in outs) == 1
    srv.stop(timeout=2)
