"""InternVL through the service: both backends, inline and shm, the cache, routing by model name.

The served outputs equal transformers' GotOcr2ImageProcessorPil (main env) and
GotOcr2ImageProcessor (the oracle venv), configured as OpenGVLab/InternVL3-1B-hf's
preprocessor_config.json (HUB_INTERNVL): each image its tiles then its thumbnail, (3, 448, 448)
each, 256 tokens per tile, grid_thw the tile grid."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402
from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (  # noqa: E402
    GotOcr2ImageProcessorPil,
)

from smg_fast.client import _verify  # noqa: E402
from smg_fast.testing.oracles import HUB_INTERNVL, hf_internvl  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): InternVL on each backend, and Qwen2-VL."""
    return dict(models=[("internvl", "internvl"), ("internvl_tv", "internvl:torchvision"),
                        ("qwen", "qwen2_vl")], pixel_cache_mb=64)


def _pil_reference(data: bytes) -> tuple[np.ndarray, int]:
    from transformers.image_utils import load_image

    ref = hf_internvl(GotOcr2ImageProcessorPil)
    out = ref(load_image(Image.open(io.BytesIO(data))), return_tensors="np")
    return np.asarray(out["pixel_values"]), int(out["num_patches"][0])


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, transport):
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model="internvl", transport=transport).items[0]
        want, tiles = _pil_reference(small_jpegs[n])
        assert tiles > 1 and np.array_equal(np.asarray(item.pixel_values), want), n
        _, rows, cols = item.grid_thw
        assert rows * cols + 1 == tiles and item.num_tokens == 256 * tiles


def test_torchvision_backend_equals_transformers(client, small_jpegs, tmp_path):
    imgs = [Image.open(io.BytesIO(small_jpegs[n])).convert("RGB") for n in NAMES]
    refs = run_oracle(tmp_path, [{"cls": "internvl", "kwargs": HUB_INTERNVL, "images": [im]}
                                 for im in imgs])
    for i, n in enumerate(NAMES):
        for transport in ("inline", "shm"):
            item = client.preprocess(small_jpegs[n], model="internvl_tv",
                                     transport=transport).items[0]
            assert np.array_equal(np.asarray(item.pixel_values), refs[i]["pixel_values"]), n


def test_batch_cache_and_routing_by_model(client, small_jpegs):
    data = [small_jpegs[n] for n in NAMES]
    first = client.preprocess(data, model="internvl", transport="inline")
    again = client.preprocess(data, model="internvl", transport="inline")
    assert [it.cache_hit for it in again.items] == [True, True]
    for a, b in zip(first.items, again.items, strict=True):
        assert np.array_equal(a.pixel_values, b.pixel_values)
    tiles = sum(_pil_reference(d)[1] for d in data)
    assert np.asarray(first.pixel_values).shape == (tiles, 3, 448, 448)
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape[1:] != (3, 448, 448)


def test_verify_compares_with_transformers(client, small_jpegs):
    info = client.model_info()
    data = small_jpegs["chelsea"]
    got = client.preprocess(data, model="internvl", transport="inline").items[0].pixel_values
    verdict = _verify(info, "internvl", data, "float32", got)
    assert verdict.endswith("bit-exact with transformers (pil)"), verdict
