"""Per-caller shares of the server's RDMA arena, with real NIXL.

A caller that never pulls holds at most its share of the slots (--rdma-caller-slots): its next
items fall back (counted as arena_share) while another caller still gets rdma and exact tensors;
its share comes back when it pulls or when the TTL reaps its slots. A caller is the address it
connects from: more connections from it share its one share (the other caller here connects
over IPv6 loopback, a host of its own). The share bookkeeping on its
own: concurrent takes never pass the share, and a reap pass frees only leases past their TTL."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast.client import Client
from smg_fast.transport.rdma.shares import CallerShares
from smg_fast.transport.tensors import read_tensor

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ("chelsea", "rocket", "coffee", "china", "flower", "hubble")


def _channel(target: str) -> grpc.Channel:
    """A channel on its own connection (a caller of its own)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def _request(jpegs: list[bytes]) -> pb.PreprocessRequest:
    return pb.PreprocessRequest(items=[pb.MediaItem(data=j) for j in jpegs], transport="rdma")


def _until(cond, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_hoarding_caller_does_not_starve_another(start_server, small_jpegs, ours, puller):
    srv = start_server(transport="rdma", rdma_slots=8, rdma_slot_bytes=8 * MiB,
                       pixel_cache_mb=0, host="::")
    assert srv.server.rdma.ready, srv.server.rdma.reason
    exporter = srv.server.rdma.exporter
    shares = exporter.shares
    assert shares is not None and shares.per_caller == 2  # auto: a quarter of 8 slots
    v4, v6 = f"127.0.0.1:{srv.port}", f"[::1]:{srv.port}"
    jpegs = [small_jpegs[n] for n in NAMES]
    refs = [ours("qwen2_vl")(j)["pixel_values"] for j in jpegs]
    reg = srv.server.metrics.registry

    def fallbacks() -> float:
        return reg.get_sample_value("smg_fast_fallback_total",
                                    {"reason": "arena_share", "used": "inline"}) or 0

    with _channel(v4) as a_ch:
        hoarder = pb_grpc.PreprocessorStub(a_ch)
        held = hoarder.Preprocess(_request(jpegs[:4]), timeout=60)  # never pulled (yet)
        assert [it.transport for it in held.items] == ["rdma", "rdma", "inline", "inline"]
        assert fallbacks() == 2 and exporter.arena.in_use == 2
        for it, ref in zip(held.items[2:], refs[2:4], strict=True):
            assert np.array_equal(read_tensor(it.pixel_values), ref)
        # another caller (another host) still gets the rest of the arena, exactly
        with Client(v6, puller=puller, timeout=60) as other:
            for _ in range(3):
                out = other.preprocess(jpegs[4:6], transport="rdma")
                assert [it.transport for it in out.items] == ["rdma", "rdma"]
                for got, ref in zip(out.items, refs[4:6], strict=True):
                    assert np.array_equal(got.pixel_values, ref)
                _until(lambda: exporter.arena.in_use == 2, "the other caller's slots came back")
        again = hoarder.Preprocess(_request(jpegs[:1]), timeout=60)
        assert again.items[0].transport == "inline" and fallbacks() == 3
        # pulling (the puller confirms each read) gives the hoarder its share back
        for it, ref in zip(held.items[:2], refs[:2], strict=True):
            assert np.array_equal(read_tensor(it.pixel_values, puller=puller), ref)
        _until(lambda: exporter.arena.in_use == 0 and shares.stats()["callers"] == 0,
               "the pulled slots did not come back")
        back = hoarder.Preprocess(_request(jpegs[:2]), timeout=60)
        assert [it.transport for it in back.items] == ["rdma", "rdma"]
        # and so does the TTL, for slots never pulled
        exporter.advance_reap_clock(exporter.arena.ttl_s + 1)
        _until(lambda: exporter.arena.in_use == 0 and shares.stats()["callers"] == 0,
               "the reaped slots did not come back")
        exporter.advance_reap_clock(0.0)
        last = hoarder.Preprocess(_request(jpegs[:1]), timeout=60)
        assert last.items[0].transport == "rdma"
        assert np.array_equal(read_tensor(last.items[0].pixel_values, puller=puller), refs[0])
    assert shares.stats()["share_refused"] == 3


def test_connections_from_one_host_share_one_share(start_server, small_jpegs, ours, puller):
    """A hoarder's second connection gets no second share, nor does a caller name it claims.

    Untrusted, its claim is ignored; another host still gets rdma, exactly."""
    srv = start_server(transport="rdma", rdma_slots=4, rdma_slot_bytes=8 * MiB,
                       pixel_cache_mb=0, host="::", rdma_caller_slots=2)
    assert srv.server.rdma.ready, srv.server.rdma.reason
    exporter = srv.server.rdma.exporter
    jpegs = [small_jpegs[n] for n in NAMES]
    refs = [ours("qwen2_vl")(j)["pixel_values"] for j in jpegs]
    v4, v6 = f"127.0.0.1:{srv.port}", f"[::1]:{srv.port}"
    with _channel(v4) as a, _channel(v4) as b:
        first = pb_grpc.PreprocessorStub(a).Preprocess(_request(jpegs[:2]), timeout=60)
        second = pb_grpc.PreprocessorStub(b).Preprocess(
            _request(jpegs[2:4]), timeout=60, metadata=[("smg-fast-caller", "victim")])
        assert [it.transport for it in first.items] == ["rdma", "rdma"]
        assert [it.transport for it in second.items] == ["inline", "inline"]
        assert exporter.arena.in_use == 2
        for it, ref in zip(second.items, refs[2:4], strict=True):
            assert np.array_equal(read_tensor(it.pixel_values), ref)
        with Client(v6, puller=puller, timeout=60) as other:
            out = other.preprocess(jpegs[4:6], transport="rdma")
        assert [it.transport for it in out.items] == ["rdma", "rdma"]
        for got, ref in zip(out.items, refs[4:6], strict=True):
            assert np.array_equal(got.pixel_values, ref)
        for it, ref in zip(first.items, refs[:2], strict=True):
            assert np.array_equal(read_tensor(it.pixel_values, puller=puller), ref)
    _until(lambda: exporter.arena.in_use == 0, "the pulled slots did not come back")


def test_a_trusted_routers_callers_each_have_a_share(start_server, small_jpegs, puller):
    """Over one connection from a trusted router, each named caller has its own share."""
    srv = start_server(transport="rdma", rdma_slots=4, rdma_slot_bytes=8 * MiB,
                       rdma_caller_slots=1, pixel_cache_mb=0,
                       trusted_router_peers=["127.0.0.1"])
    assert srv.server.rdma.ready, srv.server.rdma.reason
    jpeg = small_jpegs["chelsea"]
    with _channel(srv.target) as ch:
        stub = pb_grpc.PreprocessorStub(ch)

        def ask(caller: str) -> list[str]:
            resp = stub.Preprocess(_request([jpeg, jpeg]), timeout=60,
                                   metadata=[("smg-fast-caller", caller)])
            for it in resp.items:
                read_tensor(it.pixel_values, puller=puller)  # pulled: the slots come back
            return [it.transport for it in resp.items]

        assert ask("alice") == ["rdma", "inline"]
        assert ask("bob") == ["rdma", "inline"]


def test_concurrent_takes_never_pass_the_share():
    shares = CallerShares(3, ttl_s=10.0)
    got: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def take() -> None:
        start.wait()
        ok = shares.take("a")
        with lock:
            got.append(ok)

    threads = [threading.Thread(target=take) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got.count(True) == 3 and shares.held("a") == 3
    assert shares.take("b")  # another caller is not affected
    assert shares.stats() == {"share_refused": 13, "callers": 2, "caller_slots": 3}


def test_places_come_back_by_free_abort_and_reap():
    shares = CallerShares(2, ttl_s=10.0)
    assert shares.take("a") and shares.take("a") and not shares.take("a")
    shares.bind("k1", "a")  # being written: never reaped
    shares.bind("k2", "a", committed=True)
    now = time.monotonic()
    shares.reaped(now + 5)  # before k2's TTL: nothing goes
    assert shares.held("a") == 2
    shares.reaped(now + 11)  # past it: k2 goes, k1 (uncommitted) stays
    assert shares.held("a") == 1
    shares.committed("k1")
    shares.released("k1")  # freed by its key
    shares.released("k1")  # a duplicate changes nothing
    assert shares.held("a") == 0 and shares.stats()["callers"] == 0
    assert shares.take("a")
    shares.untake("a")  # the arena refused the lease
    assert shares.held("a") == 0
    with pytest.raises(ValueError):
        CallerShares(0, ttl_s=1.0)
