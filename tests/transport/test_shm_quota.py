"""Unread shm bytes are capped, per connection too.

A full tmpfs falls back inline; shm only goes to callers that see the server's /dev/shm; refusals
come from the plan."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402
from support.shm_common import (  # noqa: E402
    chelsea_png,
    dir_bytes,
    own_channel,
    shm_call,
)

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast.client import Client, build_request, read_response  # noqa: E402
from smg_fast.transport import shm  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    read_tensor,
    shm_namespace,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")


# ------------------------------------------------------------------------------------------
# 3. /dev/shm exhaustion
# ------------------------------------------------------------------------------------------


def test_shm_needs_the_callers_namespace(start_server, real_images, ours):
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_pool_mb=0)
    before = srv.server.registry.created
    with Client(srv.target, timeout=60) as c:
        for namespace in ("", "another-host:1"):
            resp = shm_call(c._stub, data, namespace)
            assert resp.items[0].transport == "inline"  # a counted fallback
            assert np.array_equal(read_response(resp).pixel_values, ref)
    assert srv.server.registry.created == before  # nothing was written to /dev/shm
    fallbacks = srv.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "shm_namespace", "used": "inline"})
    assert fallbacks == 2
    small = start_server(shm_pool_mb=0, max_message_mb=1)  # the tensor cannot go inline
    with Client(small.target, timeout=60, max_message_mb=1) as c:
        with pytest.raises(grpc.RpcError) as info:
            shm_call(c._stub, data, "another-host:1")
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "shm_namespace" in info.value.details()
        out = c.preprocess(data, transport="shm")  # with its own namespace: shm
        assert out.items[0].transport == "shm" and np.array_equal(out.pixel_values, ref)


def test_an_abusive_caller_cannot_make_others_fail(start_server, tmpfs, real_images, ours):
    """One connection requests shm and never reads.

    It holds at most its share (a quarter) of the cap, then its items go inline; a second connection
    still gets shm, exact, and nothing fails."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=32, shm_pool_mb=0)
    abuser, good = own_channel(srv.target), own_channel(srv.target)
    try:
        kinds = [shm_call(pb_grpc.PreprocessorStub(abuser), data, ns).items[0].transport
                 for _ in range(30)]  # 30 x 3.2 MB: more than the whole tmpfs
        held = dir_bytes(d)
        assert srv.server.registry.share_bytes == 8 << 20
        assert kinds.count("shm") == (8 << 20) // ref.nbytes and held <= 8 << 20
        assert set(kinds[kinds.count("shm"):]) == {"inline"}
        stub = pb_grpc.PreprocessorStub(good)
        for _ in range(5):
            resp = shm_call(stub, data, ns)
            assert resp.items[0].transport == "shm"
            out = read_tensor(resp.items[0].pixel_values, shm_dir=d)
            assert np.array_equal(out, ref)
        assert dir_bytes(d) == held  # the good caller's segments were read and unlinked
    finally:
        abuser.close()
        good.close()
        srv.stop(timeout=1)  # unlinks the abuser's unread segments
    assert dir_bytes(d) == 0


def test_over_its_share_the_abuser_alone_is_refused(start_server, tmpfs, real_images, ours):
    """Tensors too large to go inline.

    Past its share, the abusive connection gets RESOURCE_EXHAUSTED; the other connection keeps
    getting shm."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=32, shm_pool_mb=0, max_message_mb=2)
    abuser, good = own_channel(srv.target, 2), own_channel(srv.target, 2)
    try:
        stub = pb_grpc.PreprocessorStub(abuser)
        fits = (8 << 20) // ref.nbytes  # its share: a quarter of the cap
        for _ in range(fits):
            assert shm_call(stub, data, ns).items[0].transport == "shm"
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as info:
                shm_call(stub, data, ns)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "share" in info.value.details()
        stub = pb_grpc.PreprocessorStub(good)
        for _ in range(5):
            resp = shm_call(stub, data, ns)
            assert resp.items[0].transport == "shm"
            assert np.array_equal(read_tensor(resp.items[0].pixel_values, shm_dir=d), ref)
    finally:
        abuser.close()
        good.close()
        srv.stop(timeout=1)
    assert dir_bytes(d) == 0


def test_no_shm_room_is_refused_from_the_plan_before_decoding(start_server, tmpfs, real_images,
                                                              ours):
    """Unread segments fill the cap.

    A tensor too big to go inline is then refused RESOURCE_EXHAUSTED from its header, without being
    decoded (the decode count stays). Once a consumer reads a segment, the next request fits again
    (the check counts reads)."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=8, shm_pool_mb=0, max_message_mb=2)
    srv.server.registry.share_bytes = 0  # here one connection may fill the whole cap

    def decodes() -> float:
        return srv.server.metrics.registry.get_sample_value("smg_fast_decode_seconds_count")

    try:
        with own_channel(srv.target, 2) as ch:
            stub = pb_grpc.PreprocessorStub(ch)
            held = []
            for _ in range((8 << 20) // ref.nbytes):
                item = shm_call(stub, data, ns).items[0]
                assert item.transport == "shm"
                held.append(item.pixel_values)
            before = decodes()
            assert before == len(held)
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as info:
                    shm_call(stub, data, ns)
                assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "--shm-max-outstanding-mb" in info.value.details()
            assert decodes() == before  # refused from the plan
            assert np.array_equal(read_tensor(held.pop(), shm_dir=d), ref)
            # (the registry looks for reads at most once per PRESSURE_PRUNE_S while full)
            time.sleep(2 * srv.server.registry.PRESSURE_PRUNE_S)
            item = shm_call(stub, data, ns).items[0]
            assert item.transport == "shm" and decodes() == before + 1
            for td in [*held, item.pixel_values]:
                assert np.array_equal(read_tensor(td, shm_dir=d), ref)
    finally:
        srv.stop(timeout=1)
    assert dir_bytes(d) == 0


def test_a_request_whose_items_together_overflow_shm_is_refused_before_decoding(
        start_server, tmpfs, real_images, ours):
    """Items each small enough for the cap but together over it (and each too big for inline).

    The whole request is planned first, so it is refused with nothing decoded."""
    d = tmpfs(64)
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    one = ours("qwen2_vl")(data)["pixel_values"].nbytes  # about 3.3 MB, over the 2 MiB message
    srv = start_server(shm_dir=d, shm_max_outstanding_mb=8, shm_pool_mb=0, max_message_mb=2)
    srv.server.registry.share_bytes = 0  # one connection may fill the whole cap
    n = (8 << 20) // one + 1
    try:
        with own_channel(srv.target, 2) as ch:
            stub = pb_grpc.PreprocessorStub(ch)
            req = build_request([data] * n, transport="shm", namespace=ns)
            with pytest.raises(grpc.RpcError) as info:
                stub.Preprocess(req, timeout=60)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert info.value.details().startswith("no shm room") or "item" in \
                info.value.details()
            decodes = srv.server.metrics.registry.get_sample_value(
                "smg_fast_decode_seconds_count")
            assert not decodes, f"{decodes} image(s) decoded before the refusal"
    finally:
        srv.stop(timeout=1)
    assert dir_bytes(d) == 0


def test_a_full_tmpfs_falls_back_inline(start_server, tmpfs, real_images, ours):
    d = tmpfs(8)
    with open(os.path.join(d, "someone-elses-file"), "wb") as fh:
        fh.write(b"\0" * (7 << 20))  # another application filled the tmpfs
    ns = shm_namespace(d)
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=d, shm_pool_mb=0, shm_max_outstanding_mb=64)  # (over the fs)
    with own_channel(srv.target) as ch:
        resp = shm_call(pb_grpc.PreprocessorStub(ch), data, ns)
    assert resp.items[0].transport == "inline"
    assert np.array_equal(read_response(resp).pixel_values, ref)
    assert srv.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "shm_full", "used": "inline"}) == 1
    assert dir_bytes(d) == 0  # the failed segment was removed


def test_outstanding_cap_default_flag_and_env(tmpfs):
    from smg_fast.server.flags import config_from_args

    d = tmpfs(64)
    assert shm.default_outstanding_cap(d) == 32 << 20  # half the tmpfs (RAM is larger)
    assert config_from_args([], environ={}).shm_max_outstanding_mb == 0  # = that default
    env = {"SMG_FAST_SHM_MAX_OUTSTANDING_MB": "100"}
    assert config_from_args([], environ=env).shm_max_outstanding_mb == 100
    assert config_from_args(["--shm-max-outstanding-mb", "7"],
                            environ=env).shm_max_outstanding_mb == 7
    with pytest.raises(SystemExit):
        config_from_args(["--shm-max-outstanding-mb", "-1"], environ={})
    reg = shm.ShmRegistry(d, max_outstanding_bytes=1 << 20, share_bytes=1 << 19)
    try:
        a = reg.write(1 << 19, lambda s: None, caller="a")
        with pytest.raises(shm.ShmQuotaError) as info:
            reg.write(1, lambda s: None, caller="a")
        assert info.value.reason == "share"
        b = reg.write(1 << 19, lambda s: None, caller="b")
        with pytest.raises(shm.ShmQuotaError) as info:
            reg.write(1, lambda s: None, caller="c")
        assert info.value.reason == "cap"
        os.unlink(os.path.join(d, a))  # read by its consumer: room again (after a prune)
        time.sleep(reg.PRESSURE_PRUNE_S)
        c = reg.write(1 << 19, lambda s: None, caller="c")
        assert sorted(reg.owned()) == sorted([b, c]) and reg.refused == 2
    finally:
        reg.close()
