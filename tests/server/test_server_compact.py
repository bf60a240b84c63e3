"""encoding="uint8+lut" through the service: every family and backend, inline and shm, the cache.

The compact TensorData expands, on the client, to exactly the tensor the plain request returns
and the in-process processor computes, in a quarter of float32's bytes; the pixel cache keys it
by format; unknown encodings and inexact families get INVALID_ARGUMENT; plain requests keep the
plain TensorData."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

pytest.importorskip("grpc")

from smg_fast import CompactTensor, expand  # noqa: E402
from smg_fast.client import build_request, main  # noqa: E402
from smg_fast.processors.registry import get_family  # noqa: E402
from smg_fast.transport.tensors import read_tensor  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25", "glm4v", "glm46v", "paddleocr_vl",
            "ernie4_5_vl_moe", "hunyuan_vl", "gemma3")
MODELS = [(f"{n}-{b}", f"{n}:{b}") for n in FAMILIES for b in get_family(n).backends]
DTYPES = ("float32", "bfloat16", "float16")


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): every family on every backend, a cache."""
    return dict(models=MODELS, pixel_cache_mb=64, shm_min_bytes=0)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint8)


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_every_model_expands_to_the_plain_output(client, small_jpegs, ours, transport):
    data = small_jpegs["chelsea"]
    for model, spec in MODELS:
        family, backend = spec.split(":")
        local = ours(family, backend=backend)
        for dtype in DTYPES:
            plain = client.preprocess(data, model=model, dtype=dtype, transport=transport)
            out = client.preprocess(data, model=model, dtype=dtype, transport=transport,
                                    encoding="uint8+lut")
            item = out.items[0]
            c = item.pixel_values
            assert isinstance(c, CompactTensor) and c.dtype == dtype, model
            assert item.transport == transport
            want = local(data, dtype=dtype)["pixel_values"]
            assert np.array_equal(_bits(expand(c)), _bits(want)), (model, dtype)
            assert np.array_equal(_bits(expand(c)), _bits(plain.pixel_values)), (model, dtype)
            assert (item.grid_thw, item.num_tokens) == (plain.items[0].grid_thw,
                                                       plain.items[0].num_tokens)
            got = client.preprocess(data, model=model, dtype=dtype, transport=transport,
                                    encoding="uint8+lut", expand=True).pixel_values
            assert np.array_equal(_bits(got), _bits(want)), (model, dtype)


def test_a_quarter_of_the_bytes_and_the_wire_fields(server, small_jpegs):
    """The raw response: uint8 codes, the table, the run; plain responses carry no encoding."""
    from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc

    data = small_jpegs["china"]
    with grpc.insecure_channel(server.target) as ch:
        stub = pb_grpc.PreprocessorStub(ch)
        plain = stub.Preprocess(build_request(data, model="qwen2_vl-pil", transport="inline"))
        compact = stub.Preprocess(build_request(data, model="qwen2_vl-pil", transport="inline",
                                                encoding="uint8+lut"))
    p, c = plain.items[0].pixel_values, compact.items[0].pixel_values
    assert (p.encoding, p.HasField("lut"), p.dtype) == ("", False, "float32")
    assert (c.encoding, c.dtype, c.lut.dtype, c.lut.run) == ("uint8+lut", "uint8", "float32",
                                                             3 * 2 * 14 * 14 // 3)
    assert list(c.shape) == list(p.shape) and len(c.inline) * 4 == len(p.inline)
    assert len(c.lut.table) == 3 * 256 * 4
    codes = read_tensor(c, expand=False)
    assert isinstance(codes, CompactTensor) and np.array_equal(expand(codes), read_tensor(p))
    # an old reader of the payload alone sees the uint8 codes, never floats it would misread
    c.encoding = ""
    assert read_tensor(c).dtype == np.uint8


def test_cache_is_keyed_by_format(client, real_images):
    import io

    buf = io.BytesIO()
    real_images.rgb("hubble").resize((300, 200)).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    first = client.preprocess(data, model="qwen2_vl-pil", encoding="uint8+lut")
    again = client.preprocess(data, model="qwen2_vl-pil", encoding="uint8+lut")
    bf16 = client.preprocess(data, model="qwen2_vl-pil", dtype="bfloat16", encoding="uint8+lut")
    plain = client.preprocess(data, model="qwen2_vl-pil")
    assert [r.items[0].cache_hit for r in (first, again, bf16, plain)] == [False, True, True,
                                                                           False]
    assert np.array_equal(expand(again.pixel_values), plain.pixel_values)
    assert bf16.pixel_values.dtype == "bfloat16"
    bits = client.preprocess(data, model="qwen2_vl-pil", dtype="bfloat16").pixel_values
    assert np.array_equal(expand(bf16.pixel_values), bits)


def test_refusals(client, small_jpegs, monkeypatch):
    data = small_jpegs["rocket"]
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(data, model="qwen2_vl-pil", encoding="uint4")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown encoding" in err.value.details()
    from smg_fast.processors.families import QwenVLProcessor

    monkeypatch.setattr(QwenVLProcessor, "compact_exact", False)
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(data, model="qwen2_vl-pil", encoding="uint8+lut")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a table of its uint8 pixels" in err.value.details()
    assert client.preprocess(data, model="qwen2_vl-pil").pixel_values.dtype == np.float32


def test_client_cli_verifies_the_compact_format(server, small_jpegs, tmp_path, capsys):
    path = tmp_path / "img.jpg"
    path.write_bytes(small_jpegs["flower"])
    code = main([str(path), "--target", server.target, "--model", "kimi_k25-upstream",
                 "--dtype", "bfloat16", "--encoding", "uint8+lut", "--verify",
                 "--transport", "shm"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "bfloat16 as uint8+lut" in out and "identical to in-process" in out


def test_async_client_and_several_items(server, small_jpegs, ours):
    import asyncio

    from smg_fast.client import AsyncClient

    images = [small_jpegs["chelsea"], small_jpegs["coffee"]]

    async def call():
        async with AsyncClient(server.target, timeout=60) as c:
            return (await c.preprocess(images, model="glm4v-torchvision", dtype="bfloat16",
                                       encoding="uint8+lut", transport="shm"),
                    await c.preprocess(images, model="glm4v-torchvision", dtype="bfloat16",
                                       encoding="uint8+lut", expand=True))

    compact, expanded = asyncio.run(call())
    want = ours("glm4v", backend="torchvision")(images, dtype="bfloat16")["pixel_values"]
    both = compact.pixel_values  # the items' codes concatenated, one table
    assert isinstance(both, CompactTensor) and both.shape == want.shape
    assert np.array_equal(expand(both), want)
    assert np.array_equal(expanded.pixel_values, want)
