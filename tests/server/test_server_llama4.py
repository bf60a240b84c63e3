"""Llama 4 through the service: inline and shm, float32 / bfloat16 / compact, the cache.

The served outputs equal transformers' Llama4ImageProcessor in the oracle venv (torchvision
only), configured as Llama-4-Scout's preprocessor_config.json (HUB_LLAMA4): each image its
best-fit canvas's tiles then its global tile, (3, 336, 336) each, bfloat16 bits as transformers
returns them and the same values in float32; grid_thw [1, rows, columns] (aspect_ratios) and
144 tokens per tile."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.images import encode  # noqa: E402
from support.served_family import served_twice  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402

from smg_fast import expand  # noqa: E402
from smg_fast.testing.oracles import HUB_LLAMA4  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket", "logo2"]  # two JPEGs, a PNG with transparency


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): Llama 4, Qwen2-VL."""
    return dict(models=[("llama4", "llama4"), ("qwen", "qwen2_vl")], pixel_cache_mb=64)


@pytest.fixture(scope="module")
def encoded(real_images) -> dict[str, bytes]:
    """Real photos as JPEG, and the transparent logo as PNG, at their own sizes."""
    return {n: encode(real_images.open(n), "PNG") if n == "logo2"
            else encode(real_images.rgb(n), "JPEG", quality=90) for n in NAMES}


@pytest.fixture(scope="module")
def tv_refs(encoded, tmp_path_factory):
    """name -> transformers' outputs (pixel_values float32, bf16 bits, aspect_ratios)."""
    from transformers.image_utils import load_image

    jobs = [{"cls": "llama4", "kwargs": HUB_LLAMA4,
             "images": [load_image(Image.open(io.BytesIO(encoded[n])))]} for n in NAMES]
    return dict(zip(NAMES, run_oracle(tmp_path_factory.mktemp("tv_llama4_srv"), jobs),
                    strict=True))


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_served_equals_transformers(client, encoded, tv_refs, transport):
    for n in NAMES:
        ref = tv_refs[n]
        f32 = client.preprocess(encoded[n], model="llama4", transport=transport).items[0]
        assert np.array_equal(np.asarray(f32.pixel_values), ref["pixel_values"]), n
        bf = client.preprocess(encoded[n], model="llama4", dtype="bfloat16",
                               transport=transport).items[0]
        bits = np.asarray(bf.pixel_values)
        assert bits.dtype == np.uint16 and np.array_equal(bits, ref["bf16"]), n
        _, rows, cols = bf.grid_thw
        assert [[rows, cols]] == ref["grid"].tolist()
        tiles = rows * cols + (rows * cols > 1)
        assert bits.shape[0] == tiles and bf.num_tokens == 144 * tiles


def test_compact_format_expands_to_transformers(client, encoded, tv_refs):
    for n in NAMES:
        item = client.preprocess(encoded[n], model="llama4", dtype="bfloat16",
                                 encoding="uint8+lut").items[0]
        assert np.array_equal(np.asarray(expand(item.pixel_values)), tv_refs[n]["bf16"]), n


def test_batch_cache_and_routing_by_model(client, encoded, tv_refs):
    assert all(int(np.prod(tv_refs[n]["grid"])) > 1 for n in NAMES)  # global tiles too
    data = [encoded[n] for n in NAMES]
    first = served_twice(client, data, "llama4")
    assert np.array_equal(np.asarray(first.pixel_values),
                          np.concatenate([tv_refs[n]["pixel_values"] for n in NAMES]))
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape[1:] != (3, 336, 336)
