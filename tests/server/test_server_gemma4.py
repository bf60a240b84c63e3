"""Gemma 4 and Gemma 3n through the service: both backends, inline and shm, the cache, routing.

The served outputs equal transformers' Gemma4ImageProcessorPil / SiglipImageProcessorPil (main
env) and Gemma4ImageProcessor / SiglipImageProcessor (the oracle venv), configured as the
published checkpoints (HUB_GEMMA4, HUB_GEMMA3N). A Gemma 4 item is its (1, 2520, 768)
pixel_values, padding included, its grid (1, h, w) (from which image_position_ids follow) and its
soft tokens."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402
from transformers.image_utils import load_image  # noqa: E402
from transformers.models.gemma4.image_processing_pil_gemma4 import (  # noqa: E402
    Gemma4ImageProcessorPil,
)
from transformers.models.siglip.image_processing_pil_siglip import (  # noqa: E402
    SiglipImageProcessorPil,
)

from smg_fast.testing.oracles import HUB_GEMMA3N, HUB_GEMMA4, hf_gemma3n, hf_gemma4  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): both families on each backend, and Qwen2-VL."""
    return dict(models=[("g4", "gemma4"), ("g4_tv", "gemma4:torchvision"), ("g3n", "gemma3n"),
                        ("g3n_tv", "gemma3n:torchvision"), ("qwen", "qwen2_vl")],
                pixel_cache_mb=64)


def _pil_reference(cls, data: bytes) -> dict:
    ref = hf_gemma4(cls) if cls is Gemma4ImageProcessorPil else hf_gemma3n(cls)
    return ref(load_image(Image.open(io.BytesIO(data))), return_tensors="np")


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backends_equal_transformers(client, small_jpegs, transport):
    for n in NAMES:
        want = _pil_reference(Gemma4ImageProcessorPil, small_jpegs[n])
        item = client.preprocess(small_jpegs[n], model="g4", transport=transport).items[0]
        assert np.array_equal(np.asarray(item.pixel_values), want["pixel_values"]), n
        _, gh, gw = item.grid_thw
        assert item.num_tokens == want["num_soft_tokens_per_image"][0] == gh * gw // 9
        assert np.array_equal(want["image_position_ids"][0, :gh * gw],
                              np.stack(np.meshgrid(np.arange(gw), np.arange(gh)), -1)
                              .reshape(-1, 2))
        want = _pil_reference(SiglipImageProcessorPil, small_jpegs[n])
        item = client.preprocess(small_jpegs[n], model="g3n", transport=transport).items[0]
        assert np.array_equal(np.asarray(item.pixel_values), want["pixel_values"]), n
        assert item.num_tokens == 256


def test_torchvision_backends_equal_transformers(client, small_jpegs, tmp_path):
    imgs = [Image.open(io.BytesIO(small_jpegs[n])).convert("RGB") for n in NAMES]
    refs = run_oracle(tmp_path, [{"cls": cls, "kwargs": kw, "images": [im]} for im in imgs
                                 for cls, kw in (("gemma4", HUB_GEMMA4), ("siglip", HUB_GEMMA3N))])
    for i, n in enumerate(NAMES):
        for j, model in enumerate(("g4_tv", "g3n_tv")):
            for transport in ("inline", "shm"):
                item = client.preprocess(small_jpegs[n], model=model,
                                         transport=transport).items[0]
                want = refs[2 * i + j]["pixel_values"]
                assert np.array_equal(np.asarray(item.pixel_values), want), (n, model)


def test_batch_cache_and_routing_by_model(client, small_jpegs):
    data = [small_jpegs[n] for n in NAMES]
    runs = [client.preprocess(data, model="g4", transport="inline") for _ in range(2)]
    assert [it.cache_hit for it in runs[1].items] == [True, True]
    assert np.array_equal(np.asarray(runs[0].pixel_values), np.asarray(runs[1].pixel_values))
    assert np.asarray(runs[0].pixel_values).shape == (2, 2520, 768)
    # the same bytes for another model are that model's computation, not the cached one
    other = client.preprocess(data[0], model="g3n", transport="inline").items[0]
    assert np.asarray(other.pixel_values).shape == (1, 3, 768, 768)


def test_verify_compares_with_transformers(client, small_jpegs):
    """The client's --verify check on each family's served tensor."""
    from smg_fast.client import _verify

    data = small_jpegs["chelsea"]
    items = {m: client.preprocess(data, model=m, transport="inline").items[0]
             for m in ("g4", "g3n")}
    info = client.model_info()
    verdicts = {m: _verify(info, m, data, "float32", it.pixel_values) for m, it in items.items()}
    assert all(v.endswith("bit-exact with transformers (pil)") for v in verdicts.values()), verdicts
