"""The server decodes a JPEG inside the native call that computes it, into its destination.

PlannedBatch.write_into: the decode overlaps the resize, straight into the destination. Exact to
transformers through inline and shm, pixel cache on and off (path asserted); damaged data ends as
Pillow's decode ends; the decode still counts as decoding in the timings and the metrics; nothing
leaks. The RDMA side (a lease lost after its write) is in test_rdma_server_overlap.py."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from support.hf_oracle import hf_call
from support.images import encode
from support.outputs import assert_arrays_equal

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast.client import Client  # noqa: E402
from smg_fast.imaging import decoders  # noqa: E402
from smg_fast.processors.batch import PlannedBatch  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


SERVER_VARIANTS = ("nocache", "cache")


def server_fields(variant: str) -> dict:
    """The module's `server` (tests/conftest.py), with its pixel cache off and on."""
    return dict(models=[("qwen2_vl", "qwen2_vl")], pixel_cache_mb=32 if variant == "cache" else 0)


@pytest.fixture()
def paths(monkeypatch) -> list[str]:
    """How the server's images were decoded.

    "ahead" (PlannedBatch.decode, before the compute), "overlapped" (inside it), "failed" (the
    overlapped decode gave up; Pillow decided)."""
    seen: list[str] = []
    real_decode, real_running = PlannedBatch.decode, decoders.decode_jpeg_running

    def decode(self):
        seen.append("ahead")
        return real_decode(self)

    def running(*args):
        done = real_running(*args)
        seen.append("overlapped" if done else "failed")
        return done

    monkeypatch.setattr(PlannedBatch, "decode", decode)
    monkeypatch.setattr(decoders, "decode_jpeg_running", running)
    return seen


@pytest.fixture(scope="module")
def jpeg(photo_720p) -> bytes:
    return encode(photo_720p, "JPEG", quality=90)


def decodes(server, what: str = "count") -> float:
    reg = server.server.metrics.registry
    return reg.get_sample_value(f"smg_fast_decode_seconds_{what}") or 0


def transformers(hf_qwen, data: bytes) -> np.ndarray:
    return hf_call(hf_qwen("qwen2_vl"), [Image.open(io.BytesIO(data))])[0]


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_exact_and_decoded_inside_the_compute(server, photo_720p, hf_qwen, paths, transport):
    assert decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG
    data = encode(photo_720p, "JPEG", quality=80 if transport == "inline" else 85)  # no earlier hit
    want = transformers(hf_qwen, data)
    computed = 1 if server.server.cache is not None else 2  # a cache hit decodes nothing
    before = decodes(server)
    with Client(server.target, timeout=30) as c:
        spent = decodes(server, "sum")
        outs = [c.preprocess(data, transport=transport)]
        spent = decodes(server, "sum") - spent  # the overlapped decode's own time
        outs.append(c.preprocess(data, transport=transport))
    for out in outs:
        assert out.items[0].transport == transport
        assert_arrays_equal(out.pixel_values, want)
    assert paths == ["overlapped"] * computed
    # The decode is counted as decoding (once per decoded image), not hidden in preprocessing.
    assert decodes(server) - before == computed
    assert spent > 0 and outs[0].timings["decode_us"] >= int(spent * 1e6)


def test_damaged_data_gives_pillows_pixels(server, jpeg, hf_qwen, paths):
    """Flipped entropy bytes.

    Libjpeg warns, the output written so far is dropped and Pillow decodes into the same destination
    (here it decodes the damage)."""
    data = bytearray(jpeg)
    start = data.rindex(b"\xff\xda")
    for k in range(4):
        data[start + 20 + (len(data) - start) // 3 + k * 37] ^= 0x5A
    data = bytes(data)
    with Client(server.target, timeout=30) as c:
        out = c.preprocess(data, transport="shm")
    assert out.items[0].transport == "shm"
    assert_arrays_equal(out.pixel_values, transformers(hf_qwen, data))
    assert paths == ["failed"]


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_truncated_is_invalid_and_leaves_nothing(server, jpeg, paths, transport):
    ok = encode(Image.new("RGB", (64, 64), (9, 99, 199)), "PNG")
    broken = jpeg[: len(jpeg) // 2]
    held = server.server.registry.outstanding_bytes  # earlier tests' segments, not yet pruned
    with Client(server.target, timeout=30) as c:
        with pytest.raises(grpc.RpcError) as info:
            c.preprocess([ok, broken], transport=transport)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details().startswith("item 1:"), info.value.details()
        # the PNG decoded ahead (unless a cache hit), the JPEG inside
        assert paths in (["ahead", "failed"], ["failed"])
        # the slab taken for the JPEG (and the PNG's delivered one) given back
        assert server.server.registry.outstanding_bytes <= held
        assert c.preprocess(ok, transport=transport).items[0].transport == transport
