"""Every bad input gets its gRPC status and a message naming the item.

Nothing leaks (no shm file, no pool buffer) and the server keeps serving."""

from __future__ import annotations

import base64
import io
import os
import time

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("grpc")

import grpc  # noqa: E402

import smg_fast  # noqa: E402
from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.client import Client  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture(scope="module")
def hostile_media_dir(tmp_path_factory, small_jpegs):
    d = tmp_path_factory.mktemp("allowed")
    (d / "ok.jpg").write_bytes(small_jpegs["rocket"])
    (d / "empty.jpg").write_bytes(b"")
    (d / "sub").mkdir()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.jpg").write_bytes(small_jpegs["chelsea"])
    os.symlink(outside / "secret.jpg", d / "escape.jpg")
    os.mkfifo(d / "fifo.jpg")
    return d


SERVER_VARIANTS = ("cache", "nocache")


def server_fields(variant: str, hostile_media_dir) -> dict:
    """The module's `server` (tests/conftest.py), with its pixel cache on and off."""
    return dict(models=[("qwen2_vl", "qwen2_vl"), ("kimi", "kimi_k25")],
                pixel_cache_mb=32 if variant == "cache" else 0,
                allowed_media_dirs=[str(hostile_media_dir)], max_image_pixels=2_000_000)


def png(size, mode="RGB"):
    buf = io.BytesIO()
    Image.new(mode, size, 128).save(buf, "PNG")
    return buf.getvalue()


def rpc_error(fn, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        fn(*args, **kwargs)
    return info.value


def raw_call(server, items, **fields):
    req = pb.PreprocessRequest(items=items, **fields)
    with Client(server.target, timeout=30) as c:
        return c._stub.Preprocess(req, timeout=30)


@pytest.fixture
def ok(small_jpegs):
    return small_jpegs["rocket"]


def check(err, code, *fragments):
    assert err.code() == code, (err.code(), err.details())
    for frag in fragments:
        assert frag in err.details(), err.details()
    assert "Traceback" not in err.details()


def test_undecodable_and_truncated(client, ok, small_jpegs):
    for transport in ("inline", "shm"):
        err = rpc_error(client.preprocess, [ok, b"not an image at all"], transport=transport)
        check(err, INVALID, "item 1:", "cannot decode")
        assert "0x" not in err.details()  # no Python object reprs
        truncated = small_jpegs["china"][: len(small_jpegs["china"]) // 2]
        err = rpc_error(client.preprocess, [ok, ok, truncated], transport=transport)
        check(err, INVALID, "item 2:")


def test_aspect_ratio_and_too_many_pixels(client, ok):
    check(rpc_error(client.preprocess, [ok, png((1, 300))]), INVALID, "item 1:", "aspect ratio")
    check(rpc_error(client.preprocess, [png((2000, 1001))]), INVALID, "item 0:", "exceeds")


def test_bad_request_fields(client, ok):
    check(rpc_error(client.preprocess, ok, model="llava"), INVALID, "unknown model 'llava'")
    check(rpc_error(client.preprocess, ok, dtype="int8"), INVALID, "unsupported dtype 'int8'")
    check(rpc_error(client.preprocess, ok, dtype="uint8"), INVALID, "unsupported dtype 'uint8'")
    check(rpc_error(client.preprocess, ok, transport="pigeon"), INVALID,
          "unknown transport 'pigeon'")
    check(rpc_error(client.preprocess, []), INVALID, "no items")
    check(rpc_error(client.preprocess, ok, min_pixels=100000, max_pixels=5000), INVALID,
          "min_pixels")
    check(rpc_error(client.preprocess, ok, model="kimi", max_pixels=5000), INVALID,
          "Qwen models only")


def test_bad_media_items(server, client, ok, hostile_media_dir):
    d = str(hostile_media_dir)
    cases = [
        (pb.MediaItem(), "neither data nor url"),
        (pb.MediaItem(data=b""), "empty data"),
        (pb.MediaItem(url="file:///etc/passwd"), "outside the allowed media directories"),
        (pb.MediaItem(url=d + "/../" + os.path.basename(d) + "x/ok.jpg"), "outside"),
        (pb.MediaItem(url=d + "/escape.jpg"), "outside the allowed media directories"),
        (pb.MediaItem(url="ok.jpg"), "must be absolute"),
        (pb.MediaItem(url=d + "/missing.jpg"), "no such file"),
        (pb.MediaItem(url=d + "/sub"), "not a regular file"),
        (pb.MediaItem(url=d + "/fifo.jpg"), "not a regular file"),
        (pb.MediaItem(url=d + "/empty.jpg"), "empty file"),
        (pb.MediaItem(url="http://example.invalid/cat.jpg"), "unsupported URL scheme 'http'"),
        (pb.MediaItem(url="file://otherhost/x.jpg"), "remote host"),
        (pb.MediaItem(url="data:image/png;base64,@@@"), "malformed base64"),
        (pb.MediaItem(url="data:image/png;base64"), "malformed data: URL"),
        (pb.MediaItem(url="data:,"), "no data"),
    ]
    for item, fragment in cases:
        err = rpc_error(raw_call, server, [pb.MediaItem(data=ok), item])
        check(err, INVALID, "item 1:", fragment)


def test_file_urls_disabled_without_allowed_dir(start_server, small_jpegs, tmp_path):
    p = tmp_path / "x.jpg"
    p.write_bytes(small_jpegs["rocket"])
    srv = start_server()
    try:
        err = rpc_error(raw_call, srv, [pb.MediaItem(url=str(p))])
        check(err, INVALID, "item 0:", "--allowed-media-dir")
    finally:
        srv.stop(timeout=1)


def test_malformed_message(server):
    with grpc.insecure_channel(server.target) as ch:
        call = ch.unary_unary("/smg_fast.v1.Preprocessor/Preprocess")
        err = rpc_error(call, b"\xff\xff\xff\xff garbage", timeout=10)
    check(err, INVALID, "malformed PreprocessRequest")


def test_leaks_nothing_and_keeps_serving(server, client, ok, small_jpegs, ours):
    """Failures after some items were already written (to shm or the pool) free them all."""
    good = [small_jpegs["hubble"], small_jpegs["flower"]]
    client.preprocess(good, transport="shm")  # warm the pools (and the cache) first
    live0 = smg_fast.scratch_stats()["live_bytes"]
    owned0 = len(server.server.registry.owned())
    for transport in ("shm", "inline"):
        for bad in (b"garbage", png((1, 500))):
            err = rpc_error(client.preprocess, [*good, bad], transport=transport)
            check(err, INVALID, "item 2:")
    assert len(server.server.registry.owned()) == owned0
    assert smg_fast.scratch_stats()["live_bytes"] <= live0  # (process-wide: others may free)
    assert client.health() == "SERVING"
    out = client.preprocess(good, transport="shm")
    ref = ours("qwen2_vl")(good)["pixel_values"]
    assert np.array_equal(out.pixel_values, ref)


def test_coalesced_waiters_get_their_own_item_index(server, client, ok):
    """Identical bad images in flight together: each caller hears its own index."""
    import concurrent.futures

    bad = png((1, 400))
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        futs = [ex.submit(rpc_error, client.preprocess, [ok] * k + [bad]) for k in range(6)]
        errs = [f.result() for f in futs]
    for k, err in enumerate(errs):
        check(err, INVALID, f"item {k}:", "aspect ratio")


def test_message_limits(start_server, real_images, ours):
    """Inbound messages over --max-message-mb and inline responses over it.

    RESOURCE_EXHAUSTED, the latter telling to use shm; shm then works."""
    srv = start_server(max_message_mb=1)
    big = real_images.bytes("retina")  # 1411x1411 JPEG
    try:
        with Client(srv.target, timeout=30) as c:
            err = rpc_error(c.preprocess, [b"\0" * (2 << 20)])
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            err = rpc_error(c.preprocess, big, transport="inline")
            check(err, grpc.StatusCode.RESOURCE_EXHAUSTED, "message limit", "'shm'")
            out = c.preprocess(big, transport="shm")
            assert np.array_equal(out.pixel_values, ours("qwen2_vl")(big)["pixel_values"])
            assert c.health() == "SERVING"
    finally:
        srv.stop(timeout=1)


def test_cancelled_request_leaves_no_segment(server, real_images):
    big = real_images.bytes("retina")
    with Client(server.target) as c:
        for i in range(3):
            # unique bytes after the JPEG's end: always a cache miss (tens of ms of work)
            err = rpc_error(c.preprocess, big + b"%d" % i, transport="shm", timeout=0.005)
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.monotonic() + 10
    srv = server.server
    while srv.in_flight or srv.work_pending or srv.registry.prune():
        assert time.monotonic() < deadline, "segments of cancelled requests were not unlinked"
        time.sleep(0.02)


def test_unavailable_while_draining(start_server, small_jpegs, ok):
    """During a drain.

    Health NOT_SERVING, new requests UNAVAILABLE; an unread segment is waited for, then unlinked at
    the end."""
    srv = start_server(drain_timeout_s=30)
    with Client(srv.target, timeout=10) as c:
        unread = raw_call(srv, [pb.MediaItem(data=small_jpegs["china"])], transport="shm",
                          shm_namespace=c.namespace)
        name = unread.items[0].pixel_values.shm.name
        assert name and os.path.exists(f"/dev/shm/{name}")
        srv.call(srv.server.request_stop, 1.5)  # drain in the background, 1.5 s budget
        deadline = time.monotonic() + 5
        while c.health() != "NOT_SERVING":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        err = rpc_error(c.preprocess, ok)
        check(err, grpc.StatusCode.UNAVAILABLE, "shutting down")
    srv._thread.join(10)
    assert not srv._thread.is_alive()
    assert not os.path.exists(f"/dev/shm/{name}")


def test_base64_data_url_is_checked_like_bytes(client):
    url = "data:image/png;base64," + base64.b64encode(b"garbage").decode()
    check(rpc_error(client.preprocess, [url]), INVALID, "item 0:", "cannot decode")


@pytest.mark.parametrize("value", [1e6, 1000000.7, "1000000", True])
def test_pixel_budget_of_another_type_is_refused_before_sending(value):
    """The client never truncates a budget; the message's fields hold integers only."""
    from smg_fast.client_messages import build_request

    with pytest.raises(TypeError, match="max_pixels must be an int"):
        build_request([b"x"], max_pixels=value)
    if not isinstance(value, bool):  # protobuf takes a bool as 1
        with pytest.raises(TypeError):
            pb.PreprocessRequest(max_pixels=value)
    assert build_request([b"x"], max_pixels=np.int64(1000000)).max_pixels == 1000000
