"""Unread shm shares per router caller.

A server counts a request's unread segments per (connection, caller named in smg-fast-caller
metadata) only when the connection comes from a --trusted-router-peer, so behind a trusted router
one caller that never reads cannot take another caller's shm; anyone else's claim is ignored (one
share per connection, as before), and the RESOURCE_EXHAUSTED message says whose share is full. The
router names its own caller and never forwards a caller's claim."""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402
from support.routing_common import stop  # noqa: E402
from support.shm_common import chelsea_png, dir_bytes, own_channel, shm_call  # noqa: E402

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast._service.wire import CALLER_KEY  # noqa: E402
from smg_fast.client import build_request  # noqa: E402
from smg_fast.server.flags import config_from_args  # noqa: E402
from smg_fast.server.shm_shares import (  # noqa: E402
    CONNECTION,
    ROUTED,
    UNTRUSTED,
    Callers,
    peer_address,
)
from smg_fast.testing.servers import RouterProcess, ServerProcess  # noqa: E402
from smg_fast.transport.tensors import read_tensor, shm_namespace  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

CAP_MB = 32  # a share is a quarter: 8 MiB, two chelsea tensors (3.2 MB each)


def _claim(name: str) -> tuple[tuple[str, str], ...]:
    return ((CALLER_KEY, name),)


def test_peer_addresses_and_trust():
    assert str(peer_address("ipv4:10.0.0.5:4242")) == "10.0.0.5"
    assert str(peer_address("ipv6:[::1]:4242")) == "::1"
    assert str(peer_address("ipv6:[::ffff:127.0.0.1]:4242")) == "127.0.0.1"  # dual stack
    assert peer_address("unix:/tmp/sock") is None and peer_address("garbage") is None
    callers = Callers(["10.0.0.0/24", "::1"])
    assert callers.trusts("ipv4:10.0.0.77:1") and callers.trusts("ipv6:[::1]:1")
    assert not callers.trusts("ipv4:10.0.1.1:1") and not callers.trusts("unix:/x")
    peer = "ipv4:10.0.0.5:4242"
    assert callers.identify(peer, ()) == (peer, CONNECTION)
    assert callers.identify(peer, [("other", "x")]) == (peer, CONNECTION)
    assert callers.identify(peer, _claim("ipv4:1.2.3.4:5")) == (
        f"{peer} for ipv4:1.2.3.4:5", ROUTED)
    assert callers.identify(peer, _claim("a" * 1000))[0] == f"{peer} for {'a' * 256}"
    stranger = "ipv4:192.0.2.9:7"
    assert callers.identify(stranger, _claim("someone")) == (stranger, UNTRUSTED)
    assert Callers().identify(peer, _claim("someone")) == (peer, UNTRUSTED)  # none trusted


def test_the_router_names_its_caller_only_when_it_has_one():
    import contextvars

    from smg_fast.routing.forwarded_caller import CALLER, caller_metadata

    assert caller_metadata() == {}  # the library clients: calls made as before

    def named(name):
        CALLER.set(name)
        return caller_metadata()

    run = contextvars.copy_context().run
    assert run(named, "ipv4:127.0.0.1:5555") == {
        "metadata": ((CALLER_KEY, "ipv4:127.0.0.1:5555"),)}
    for odd in ("unix:/tmp/sock\n", "ipv6:" + "f" * 300, "unix:/tmp/\u00e9"):
        (key, value), = run(named, odd)["metadata"]  # sent as a hash, a valid header value
        assert key == CALLER_KEY and value.startswith("h:") and len(value) == 34
    assert caller_metadata() == {}  # set only in those contexts


def test_trusted_router_peer_flag_and_env():
    assert config_from_args([], environ={}).trusted_router_peers == []
    env = {"SMG_FAST_TRUSTED_ROUTER_PEERS": "10.0.0.1, 10.1.0.0/16"}
    assert config_from_args([], environ=env).trusted_router_peers == ["10.0.0.1", "10.1.0.0/16"]
    argv = ["--trusted-router-peer", "::1", "--trusted-router-peer", "127.0.0.1"]
    assert config_from_args(argv, environ=env).trusted_router_peers == ["::1", "127.0.0.1"]
    for argv, env in ((["--trusted-router-peer", "router.local"], {}),
                      ([], {"SMG_FAST_TRUSTED_ROUTER_PEERS": "10.0.0.300"})):
        with pytest.raises(SystemExit):
            config_from_args(argv, environ=env)


def _fill(stub, data, ns, claims, fits):
    """Asks for shm with a new claim on each call, never reading.

    The first ``fits`` calls get shm, the next ones RESOURCE_EXHAUSTED; returns their handles and
    the refusal's message."""
    held = []
    for i in range(fits + 2):
        req = build_request(data, transport="shm", namespace=ns)
        try:
            resp = stub.Preprocess(req, timeout=60, metadata=claims(i))
        except grpc.RpcError as exc:
            assert i >= fits, exc.details()
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            message = exc.details()
            continue
        assert i < fits and resp.items[0].transport == "shm"
        held.append(resp.items[0].pixel_values)
    return held, message


def test_an_untrusted_claim_gains_nothing(start_server, tmpfs, real_images, ours, caplog):
    """A client naming a new caller on every call, to a server that trusts another address.

    One share for its connection all the same, and the refusal says why; another connection still
    gets shm."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=CAP_MB, shm_pool_mb=0,
                       max_message_mb=2, trusted_router_peers=["192.0.2.1"])
    fits = (CAP_MB << 20) // 4 // ref.nbytes
    abuser, good = own_channel(srv.target, 2), own_channel(srv.target, 2)
    try:
        with caplog.at_level(logging.WARNING, "smg_fast.server"):
            held, message = _fill(pb_grpc.PreprocessorStub(abuser), data, ns,
                                  lambda i: _claim(f"tenant-{i}"), fits)
        assert len(held) == fits and dir_bytes(d) == fits * ref.nbytes
        assert "--trusted-router-peer" in message and "share" in message, message
        assert any(CALLER_KEY in r.getMessage() for r in caplog.records)
        stub = pb_grpc.PreprocessorStub(good)
        for _ in range(3):
            item = shm_call(stub, data, ns).items[0]
            assert item.transport == "shm"
            assert np.array_equal(read_tensor(item.pixel_values, shm_dir=d), ref)
        for td in held:
            assert np.array_equal(read_tensor(td, shm_dir=d), ref)
    finally:
        abuser.close()
        good.close()
        srv.stop(timeout=1)
    assert dir_bytes(d) == 0


def test_a_trusted_peer_gets_a_share_per_named_caller(start_server, tmpfs, real_images, ours):
    """A trusted peer gets one shm share per caller it names.

    From a trusted address each named caller has its own share (and its refusal names the router's
    caller); its callers together still stay under the total cap, and the connection's own requests
    (no claim) keep a share of their own."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=CAP_MB, shm_pool_mb=0,
                       max_message_mb=2, trusted_router_peers=["127.0.0.1"])
    fits = (CAP_MB << 20) // 4 // ref.nbytes
    router = own_channel(srv.target, 2)
    held = []
    try:
        stub = pb_grpc.PreprocessorStub(router)
        got, message = _fill(stub, data, ns, lambda i: _claim("A"), fits)
        held += got
        assert "router's caller" in message, message
        got, _ = _fill(stub, data, ns, lambda i: _claim("B"), fits)  # A's hoard: no matter
        held += got
        got, message = _fill(stub, data, ns, lambda i: (), fits)
        held += got
        assert message.startswith("no shm room") and "this connection" in message, message
        # shares for the asking, from a trusted address; the total cap holds them all
        with pytest.raises(grpc.RpcError) as info:
            for i in range(8):
                req = build_request(data, transport="shm", namespace=ns)
                held.append(stub.Preprocess(req, timeout=60, metadata=_claim(f"C{i}"))
                            .items[0].pixel_values)
        assert "--shm-max-outstanding-mb" in info.value.details()
        assert len(held) == (CAP_MB << 20) // ref.nbytes
        for td in held:
            assert np.array_equal(read_tensor(td, shm_dir=d), ref)
    finally:
        router.close()
        srv.stop(timeout=1)
    assert dir_bytes(d) == 0


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_through_the_router_one_caller_cannot_take_anothers_shm(trusted, real_images, ours):
    """Real server and router processes.

    Tensors too large for a message (inline impossible). Tenant A asks through the router for shm
    and never reads, naming new callers in metadata as it goes (the router ignores that); tenant B,
    on its own connection to the router, keeps getting shm, exact, from a worker that trusts the
    router. Not trusted, the router's callers share one share: B is refused, and the message says
    why."""
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    args = ["--workers", "1", "--drain-timeout-s", "2", "--shm-pool-mb", "0",
            "--shm-max-outstanding-mb", str(CAP_MB), "--max-message-mb", "2"]
    if trusted:
        args += ["--trusted-router-peer", "127.0.0.1"]
    server = router = None
    a = b = None
    held = []
    try:
        server = ServerProcess(args)
        server.wait()
        router = RouterProcess([server.target], ["--drain-timeout-s", "2"])
        router.wait()
        a, b = own_channel(router.target), own_channel(router.target)
        ns = shm_namespace()
        fits = (CAP_MB << 20) // 4 // ref.nbytes
        held, message = _fill(pb_grpc.PreprocessorStub(a), data, ns,
                              lambda i: _claim(f"tenant-{i}"), fits)
        assert len(held) == fits
        assert ("router's caller" if trusted else "--trusted-router-peer") in message, message
        stub = pb_grpc.PreprocessorStub(b)
        for _ in range(3 if trusted else 1):
            if trusted:
                item = shm_call(stub, data, ns).items[0]
                assert item.transport == "shm"
                assert np.array_equal(read_tensor(item.pixel_values), ref)
            else:
                with pytest.raises(grpc.RpcError) as info:
                    shm_call(stub, data, ns)
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--trusted-router-peer" in info.value.details()
        for td in held:  # A reads at last: nothing is left behind
            assert np.array_equal(read_tensor(td), ref)
        held = []
    finally:
        for ch in (a, b):
            if ch is not None:
                ch.close()
        for td in held:
            try:
                read_tensor(td)
            except Exception:  # noqa: BLE001 (best effort: the drain unlinks the rest)
                pass
        for p in (router, server):
            if p is not None and p.stop(timeout=15) != 0:
                stop([p])
