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
from support.served_family import (  # noqa: E402
    equals_torchvision_oracle,
    served_twice,
    verify_is_exact,
)
from transformers.image_utils import load_image  # noqa: E402
from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (  # noqa: E402
    GotOcr2ImageProcessorPil,
)

from smg_fast import load_processor  # noqa: E402
from smg_fast.testing.oracles import HUB_INTERNVL, hf_internvl  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]
MODELS = [("internvl", "internvl"), ("internvl_tv", "internvl:torchvision"),
          ("internvl_vllm", "internvl:upstream"), ("qwen", "qwen2_vl")]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): InternVL on its three backends, Qwen2-VL."""
    return dict(models=MODELS, pixel_cache_mb=64)


@pytest.fixture(scope="module")
def pil_refs(small_jpegs):
    """name -> (pixel_values, tiles) of GotOcr2ImageProcessorPil for each small JPEG."""
    ref = hf_internvl(GotOcr2ImageProcessorPil)
    outs = {n: ref(load_image(Image.open(io.BytesIO(small_jpegs[n]))), return_tensors="np")
            for n in NAMES}
    return {n: (np.asarray(o["pixel_values"]), int(o["num_patches"][0])) for n, o in outs.items()}


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, pil_refs, transport):
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model="internvl", transport=transport).items[0]
        want, tiles = pil_refs[n]
        assert tiles > 1 and np.array_equal(np.asarray(item.pixel_values), want), n
        _, rows, cols = item.grid_thw
        assert rows * cols + 1 == tiles and item.num_tokens == 256 * tiles


def test_torchvision_backend_equals_transformers(client, small_jpegs, tmp_path):
    equals_torchvision_oracle(client, {n: small_jpegs[n] for n in NAMES}, "internvl_tv",
                              "internvl", HUB_INTERNVL, tmp_path)


def test_batch_cache_and_routing_by_model(client, small_jpegs, pil_refs):
    data = [small_jpegs[n] for n in NAMES]
    first = served_twice(client, data, "internvl")
    tiles = sum(pil_refs[n][1] for n in NAMES)
    assert np.asarray(first.pixel_values).shape == (tiles, 3, 448, 448)
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape[1:] != (3, 448, 448)


def test_vllm_numerics_equal_the_library(client, small_jpegs):
    """backend "upstream" (vLLM's own InternVL processor; tests/parity/test_internvl_vllm.py)."""
    proc = load_processor("internvl", backend="upstream")
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model="internvl_vllm").items[0]
        assert np.array_equal(item.pixel_values, proc(small_jpegs[n])["pixel_values"]), n


def test_verify_compares_with_transformers(client, small_jpegs):
    verify_is_exact(client, small_jpegs["chelsea"], "internvl")
