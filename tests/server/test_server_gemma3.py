"""Gemma 3 through the service: both backends, inline and shm, the cache, routing by model name.

The served outputs equal transformers' Gemma3ImageProcessorPil (main env) and
Gemma3ImageProcessor (the oracle venv), configured as the published google/gemma-3-4b-it
preprocessor_config.json (HUB_GEMMA3); every image is one (3, 896, 896) tensor of 256 tokens."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402
from transformers.models.gemma3.image_processing_pil_gemma3 import (  # noqa: E402
    Gemma3ImageProcessorPil,
)

from smg_fast.client import _verify  # noqa: E402
from smg_fast.testing.oracles import HUB_GEMMA3, hf_gemma3  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): Gemma 3 on each backend, and Qwen2-VL."""
    return dict(models=[("gemma", "gemma3"), ("gemma_tv", "gemma3:torchvision"),
                        ("qwen", "qwen2_vl")], pixel_cache_mb=64)


def _pil_reference(data: bytes) -> np.ndarray:
    from transformers.image_utils import load_image

    ref = hf_gemma3(Gemma3ImageProcessorPil)
    image = load_image(Image.open(io.BytesIO(data)))
    return np.asarray(ref(image, return_tensors="np")["pixel_values"])


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, transport):
    for n in NAMES:
        out = client.preprocess(small_jpegs[n], model="gemma", transport=transport)
        item = out.items[0]
        assert np.array_equal(np.asarray(item.pixel_values), _pil_reference(small_jpegs[n])), n
        assert item.num_tokens == 256 and tuple(item.grid_thw) == (1, 1, 1)


def test_torchvision_backend_equals_transformers(client, small_jpegs, tmp_path):
    imgs = [Image.open(io.BytesIO(small_jpegs[n])).convert("RGB") for n in NAMES]
    refs = run_oracle(tmp_path, [{"cls": "gemma3", "kwargs": HUB_GEMMA3, "images": [im]}
                                 for im in imgs])
    for i, n in enumerate(NAMES):
        for transport in ("inline", "shm"):
            item = client.preprocess(small_jpegs[n], model="gemma_tv",
                                     transport=transport).items[0]
            assert np.array_equal(np.asarray(item.pixel_values), refs[i]["pixel_values"]), n


def test_batch_cache_and_routing_by_model(client, small_jpegs):
    data = [small_jpegs[n] for n in NAMES]
    first = client.preprocess(data, model="gemma", transport="inline")
    again = client.preprocess(data, model="gemma", transport="inline")
    assert [it.cache_hit for it in again.items] == [True, True]
    for a, b in zip(first.items, again.items, strict=True):
        assert np.array_equal(a.pixel_values, b.pixel_values)
    assert np.asarray(first.pixel_values).shape == (2, 3, 896, 896)
    # the same bytes for another model are that model's computation, not Gemma's cached one
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape != (1, 3, 896, 896)


def test_verify_compares_with_transformers(client, small_jpegs):
    info = client.model_info()
    data = small_jpegs["chelsea"]
    got = client.preprocess(data, model="gemma", transport="inline").items[0].pixel_values
    verdict = _verify(info, "gemma", data, "float32", got)
    assert verdict.endswith("bit-exact with transformers (pil)"), verdict
