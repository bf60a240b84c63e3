"""Idefics3 and SmolVLM through the service: both backends, inline and shm, the cache, routing.

The served outputs equal transformers' Idefics3ImageProcessorPil (main env) and
Idefics3ImageProcessor / SmolVLMImageProcessor (the oracle venv), configured as the published
Idefics3-8B and SmolVLM2 preprocessor_config.json: each image its tiles then its global image,
(3, tile, tile) each, in one sample [1, frames, 3, tile, tile]; image_seq_len tokens per frame,
grid_thw the tile grid."""

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
from transformers.models.idefics3.image_processing_pil_idefics3 import (  # noqa: E402
    Idefics3ImageProcessorPil,
)

from smg_fast.testing.model_folders_idefics3 import IDEFICS3, SMOLVLM2, hub_kwargs  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]
MODELS = [("idefics3", "idefics3"), ("idefics3_tv", "idefics3:torchvision"),
          ("smolvlm_tv", "smolvlm:torchvision"), ("qwen", "qwen2_vl")]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): Idefics3 on both backends, SmolVLM, Qwen2-VL."""
    return dict(models=MODELS, pixel_cache_mb=64)


@pytest.fixture(scope="module")
def pil_refs(small_jpegs):
    """name -> (pixel_values, rows, cols) of Idefics3ImageProcessorPil for each small JPEG."""
    ref = Idefics3ImageProcessorPil(**hub_kwargs(IDEFICS3))
    outs = {n: ref(load_image(Image.open(io.BytesIO(small_jpegs[n]))), return_tensors="np",
                   return_row_col_info=True) for n in NAMES}
    return {n: (np.asarray(o["pixel_values"]), o["rows"][0][0], o["cols"][0][0])
            for n, o in outs.items()}


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, pil_refs, transport):
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model="idefics3", transport=transport).items[0]
        want, rows, cols = pil_refs[n]
        assert rows * cols > 1 and np.array_equal(np.asarray(item.pixel_values), want), n
        assert tuple(item.grid_thw) == (1, rows, cols)
        assert item.num_tokens == 169 * (rows * cols + 1)


def test_torchvision_backends_equal_transformers(client, small_jpegs, tmp_path):
    jpegs = {n: small_jpegs[n] for n in NAMES}
    equals_torchvision_oracle(client, jpegs, "idefics3_tv", "idefics3", hub_kwargs(IDEFICS3),
                              tmp_path / "idefics3")
    equals_torchvision_oracle(client, jpegs, "smolvlm_tv", "smolvlm", hub_kwargs(SMOLVLM2),
                              tmp_path / "smolvlm")


def test_batch_cache_and_routing_by_model(client, small_jpegs, pil_refs):
    data = [small_jpegs[n] for n in NAMES]
    first = served_twice(client, data, "idefics3")
    for item, n in zip(first.items, NAMES, strict=True):
        assert np.array_equal(np.asarray(item.pixel_values), pil_refs[n][0]), n
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape[-2:] != (364, 364)


def test_verify_compares_with_transformers(client, small_jpegs):
    verify_is_exact(client, small_jpegs["chelsea"], "idefics3")
