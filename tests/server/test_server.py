"""The service over real gRPC on loopback.

Every transport gives exactly what the in-process processor gives; the pixel cache; model info,
health and reflection."""

from __future__ import annotations

import base64
import io
import os

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast.server import SERVICE_NAME  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

MODELS = [("qwen2_vl", "qwen2_vl"), ("kimi", "kimi_k25"), ("qwen3", "qwen3_vl")]
FAMILY = {"qwen2_vl": "qwen2_vl", "kimi": "kimi_k25", "qwen3": "qwen3_vl"}


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory, small_jpegs):
    d = tmp_path_factory.mktemp("media")
    for name, data in small_jpegs.items():
        (d / f"{name}.jpg").write_bytes(data)
    return d


SERVER_VARIANTS = ("cache", "nocache")


def server_fields(variant: str, media_dir) -> dict:
    """The module's `server` (tests/conftest.py), with its pixel cache on and off.

    rdma_min_bytes above every tensor: rdma requests here take the counted fallback without
    starting the NIXL lane (tests/transport/test_rdma_server.py covers the lane itself).
    """
    return dict(models=MODELS, pixel_cache_mb=64 if variant == "cache" else 0,
                allowed_media_dirs=[str(media_dir)], rdma_min_bytes=1 << 40)


def photo_bytes(real_images, name="chelsea"):
    return real_images.bytes(name)  # a real PNG / JPEG file as shipped


def expect(ours, model, images, dtype, **overrides):
    proc = ours(FAMILY[model], **overrides)
    return [proc(img, dtype=dtype) for img in images]


@pytest.mark.parametrize("transport", ["inline", "shm", "auto", "", "rdma"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_transports_equal_in_process(client, transport, dtype, ours, real_images, small_jpegs):
    images = [photo_bytes(real_images, "chelsea"), small_jpegs["rocket"],
              photo_bytes(real_images, "logo")]  # RGBA PNG: alpha composited onto white
    refs = expect(ours, "qwen2_vl", images, dtype)
    out = client.preprocess(images, dtype=dtype, transport=transport)
    assert len(out.items) == 3
    for item, ref in zip(out.items, refs, strict=True):
        assert np.array_equal(item.pixel_values, ref["pixel_values"])
        assert item.pixel_values.dtype == ref["pixel_values"].dtype
        assert list(item.grid_thw) == ref["image_grid_thw"][0].tolist()
        assert item.num_tokens == int(ref["num_tokens"][0])
        assert len(item.content_hash) == 32
        big = ref["pixel_values"].nbytes >= 65536  # --shm-min-bytes default
        want = "shm" if transport not in ("inline", "") and big else "inline"
        assert item.transport == want
    whole = ours("qwen2_vl")(images, dtype=dtype)
    assert np.array_equal(out.pixel_values, whole["pixel_values"])
    assert np.array_equal(out.image_grid_thw, whole["image_grid_thw"])


@pytest.mark.parametrize("model", ["kimi", "qwen3"])
@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_other_families(client, model, transport, ours, real_images):
    images = [photo_bytes(real_images, "rocket"), photo_bytes(real_images, "camera")]
    refs = expect(ours, model, images, "bfloat16")
    out = client.preprocess(images, model=model, dtype="bfloat16", transport=transport)
    for item, ref in zip(out.items, refs, strict=True):
        assert item.transport == transport
        assert np.array_equal(item.pixel_values, ref["pixel_values"])
        assert list(item.grid_thw) == ref["image_grid_thw"][0].tolist()


def test_auto_needs_the_same_namespace(client, small_jpegs, ours):
    ref = ours("qwen2_vl")(small_jpegs["china"])["pixel_values"]
    same = client.preprocess(small_jpegs["china"], transport="auto")
    assert same.items[0].transport == "shm" and np.array_equal(same.pixel_values, ref)
    saved = client.namespace
    client.namespace = "another-boot:1"
    try:
        other = client.preprocess(small_jpegs["china"], transport="auto")
        rdma = client.preprocess(small_jpegs["china"], transport="rdma")
    finally:
        client.namespace = saved
    assert other.items[0].transport == "inline" and np.array_equal(other.pixel_values, ref)
    assert rdma.items[0].transport == "inline" and np.array_equal(rdma.pixel_values, ref)


def test_rdma_falls_back_and_is_counted(server, client, small_jpegs):
    reg = server.server.metrics.registry
    labels = {"reason": "below_min_bytes", "used": "shm"}
    before = reg.get_sample_value("smg_fast_fallback_total", labels) or 0
    out = client.preprocess(small_jpegs["flower"], transport="rdma")
    assert out.items[0].transport == "shm"
    assert reg.get_sample_value("smg_fast_fallback_total", labels) == before + 1


def test_small_tensors_go_inline(client, real_images, ours):
    tiny = real_images.rgb("astronaut").resize((28, 28))
    buf = io.BytesIO()
    tiny.save(buf, "PNG")
    ref = ours("qwen2_vl")(buf.getvalue(), dtype="bfloat16")["pixel_values"]
    assert ref.nbytes < 65536
    out = client.preprocess(buf.getvalue(), dtype="bfloat16", transport="shm")
    assert out.items[0].transport == "inline" and np.array_equal(out.pixel_values, ref)


def test_min_max_pixels_override(client, real_images, ours):
    img = photo_bytes(real_images, "coffee")
    for lo, hi in [(3136, 50000), (200000, 400000)]:
        ref = ours("qwen2_vl", min_pixels=lo, max_pixels=hi)(img)
        out = client.preprocess(img, min_pixels=lo, max_pixels=hi, transport="shm")
        assert np.array_equal(out.pixel_values, ref["pixel_values"])
        assert np.array_equal(out.image_grid_thw, ref["image_grid_thw"])
        assert not out.items[0].cache_hit  # another config fingerprint: another cache key
    base = client.preprocess(img)
    assert np.array_equal(base.pixel_values, ours("qwen2_vl")(img)["pixel_values"])


def test_urls(client, media_dir, small_jpegs, ours):
    data = small_jpegs["grace_hopper"]
    ref = ours("qwen2_vl")(data)["pixel_values"]
    as_b64 = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    path = str(media_dir / "grace_hopper.jpg")
    pct = "data:image/jpeg," + "".join(f"%{b:02X}" for b in data)  # percent-encoded
    out = client.preprocess([as_b64, pct, "file://" + path], transport="shm")
    for item in out.items:
        assert np.array_equal(item.pixel_values, ref)
    assert len({i.content_hash for i in out.items}) == 1


def test_plain_path_url(server, small_jpegs, media_dir, ours):
    from smg_fast._proto import preprocessor_pb2 as pb
    from smg_fast.client import read_response

    path = str(media_dir / "hubble.jpg")
    with grpc.insecure_channel(server.target) as ch:
        from smg_fast._proto import preprocessor_pb2_grpc as pbg

        resp = pbg.PreprocessorStub(ch).Preprocess(
            pb.PreprocessRequest(items=[pb.MediaItem(url=path)]), timeout=30)
    got = read_response(resp)
    assert got.items[0].transport == "inline"  # the server default
    assert np.array_equal(got.pixel_values, ours("qwen2_vl")(small_jpegs["hubble"])["pixel_values"])


def test_cache_hits_per_image(server, client, small_jpegs, real_images):
    a = photo_bytes(real_images, "grace_hopper")
    b = small_jpegs["coffee"]
    first = client.preprocess([a], dtype="float16", transport="inline")
    both = client.preprocess([a, b], dtype="float16", transport="shm")
    cached = server.server.cache is not None
    assert [i.cache_hit for i in both.items] == [cached, False]
    assert np.array_equal(both.items[0].pixel_values, first.pixel_values)
    again = client.preprocess([b, a], dtype="float16")
    assert [i.cache_hit for i in again.items] == [cached, cached]
    other_dtype = client.preprocess([a], dtype="float32")
    assert not other_dtype.items[0].cache_hit  # dtype is part of the key
    if cached:
        s = server.server.cache.stats()
        assert s["entries"] >= 3 and s["bytes"] > 0


def test_model_info(client, server):
    info = client.model_info()
    assert info["default_model"] == "qwen2_vl"
    assert [m["name"] for m in info["models"]] == ["qwen2_vl", "kimi", "qwen3"]
    import smg_fast

    for m in info["models"]:
        cfg = smg_fast.load_processor(FAMILY[m["name"]]).config
        assert m["family"] == cfg.family and m["config_fingerprint"] == cfg.fingerprint
        assert m["patch_size"] == cfg.patch_size and m["merge_size"] == cfg.merge_size
    assert info["shm_namespace"] == client.namespace
    assert info["default_transport"] == "inline" and info["shm_min_bytes"] == 65536
    assert info["pixel_cache_bytes"] == (64 << 20 if server.server.cache is not None else 0)


def test_health(client):
    assert client.health() == "SERVING"
    assert client.health(SERVICE_NAME) == "SERVING"


def test_reflection_only_client(server, small_jpegs, ours):
    """A client that knows nothing but the server's reflection gets identical results."""
    from google.protobuf import descriptor_pool, message_factory
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    from smg_fast.transport.tensors import read_tensor

    with grpc.insecure_channel(server.target) as ch:
        db = ProtoReflectionDescriptorDatabase(ch)
        services = db.get_services()
        assert SERVICE_NAME in services and "grpc.health.v1.Health" in services
        pool = descriptor_pool.DescriptorPool(db)
        svc = pool.FindServiceByName(SERVICE_NAME)
        method = svc.FindMethodByName("Preprocess")
        Req = message_factory.GetMessageClass(method.input_type)
        Resp = message_factory.GetMessageClass(method.output_type)
        call = ch.unary_unary(f"/{SERVICE_NAME}/Preprocess",
                              request_serializer=Req.SerializeToString,
                              response_deserializer=Resp.FromString)
        from smg_fast.transport.tensors import shm_namespace

        for transport in ("inline", "shm"):
            req = Req(model="qwen2_vl", dtype="bfloat16", transport=transport,
                      shm_namespace=shm_namespace())
            req.items.add(data=small_jpegs["chelsea"])
            resp = call(req, timeout=30)
            assert type(resp).__module__ != "smg_fast._proto.preprocessor_pb2"
            got = read_tensor(resp.items[0].pixel_values)
            ref = ours("qwen2_vl")(small_jpegs["chelsea"], dtype="bfloat16")["pixel_values"]
            assert np.array_equal(got, ref)
            assert resp.items[0].pixel_values.WhichOneof("payload") == transport


def test_async_client(server, small_jpegs, ours):
    import asyncio

    from smg_fast.client import AsyncClient

    async def run():
        async with AsyncClient(server.target, timeout=30) as c:
            outs = await asyncio.gather(*(c.preprocess(small_jpegs[n], transport="shm")
                                          for n in ("rocket", "flower", "rocket")))
            health = await c.health()
        return outs, health

    outs, health = asyncio.run(run())
    assert health == "SERVING"
    for name, out in zip(("rocket", "flower", "rocket"), outs, strict=True):
        assert np.array_equal(out.pixel_values, ours("qwen2_vl")(small_jpegs[name])["pixel_values"])


def test_as_torch(client, small_jpegs, ours):
    torch = pytest.importorskip("torch")
    ref = ours("qwen2_vl")(small_jpegs["rocket"], dtype="bfloat16", return_tensors="pt")
    for transport in ("inline", "shm"):
        out = client.preprocess(small_jpegs["rocket"], dtype="bfloat16", transport=transport,
                                as_torch=True)
        assert out.pixel_values.dtype == torch.bfloat16
        assert torch.equal(out.pixel_values, ref["pixel_values"])


def test_timings_reported(client, small_jpegs):
    out = client.preprocess(small_jpegs["china"], transport="shm")
    t = out.timings
    assert t["total_us"] > 0 and t["total_us"] >= t["decode_us"]
    assert out.latency_s > 0


def test_sweeps_dead_segments_at_start(start_server, tmp_path):
    import subprocess
    import sys

    from smg_fast.transport import shm

    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                             capture_output=True, text=True, check=True).stdout)
    name = f"smg-fast-{pid}-{shm._pidns_tag()}0badf00d-7"
    path = os.path.join("/dev/shm", name)
    with open(path, "wb") as fh:
        fh.write(b"left behind")
    srv = start_server()
    try:
        assert not os.path.exists(path)
    finally:
        srv.stop(timeout=1)
        if os.path.exists(path):
            os.unlink(path)


def test_shm_miss_delivers_the_segment_the_cache_keeps(server, client, real_images, ours):
    from smg_fast.client import build_request, read_response

    data = photo_bytes(real_images, "astronaut") + b"unique-to-this-test"
    ref = ours("qwen2_vl")(data)["pixel_values"]
    req = build_request(data, transport="shm", namespace=client.namespace)
    resp = client._stub.Preprocess(req)
    name = resp.items[0].pixel_values.shm.name
    st = os.lstat(os.path.join("/dev/shm", name))
    assert oct(st.st_mode & 0o777) == oct(0o400)  # read-only for its consumer
    first = read_response(resp)  # maps and unlinks it
    assert not first.items[0].cache_hit and np.array_equal(first.pixel_values, ref)
    first.pixel_values[0, 0] = -1.0  # the consumer's private copy: the cache is unaffected
    cached = server.server.cache is not None
    for transport in ("shm", "inline"):
        again = client.preprocess(data, transport=transport)
        assert again.items[0].cache_hit == cached
        assert np.array_equal(again.pixel_values, ref)
