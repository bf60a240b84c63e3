"""The service with PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR models, both backends.

Each model's output over the service (inline and shared-memory transports, the cache, the model's
name in the request) equals transformers' classes: the PIL classes in this environment, the
torchvision classes in the oracle venv (tests/support/tv_oracle.py), with each family's hub
config (smg_fast.testing.oracles.HUB_QWEN_LIKE)."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.hf_oracle import hf_call  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402

from smg_fast.testing.oracles import (  # noqa: E402
    HUB_QWEN_LIKE,
    qwen_like_kwargs,
    qwen_like_reference,
    qwen_like_tokens,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")

FAMILIES = tuple(HUB_QWEN_LIKE)
MODELS = [(f, f) for f in FAMILIES] + [(f"{f}_tv", f"{f}:torchvision") for f in FAMILIES]
NAMES = ["chelsea", "rocket"]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): each family on each backend."""
    return dict(models=MODELS)


def pil_reference(family: str):
    return qwen_like_reference(family, "pil")


def decoded(small_jpegs, name: str) -> Image.Image:
    return Image.open(io.BytesIO(small_jpegs[name])).convert("RGB")


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_models_equal_transformers_pil(client, small_jpegs, transport):
    for fam in FAMILIES:
        for n in NAMES:
            ref_pv, ref_grid = hf_call(pil_reference(fam), decoded(small_jpegs, n))
            for _ in range(2):  # the second from the cache
                item = client.preprocess(small_jpegs[n], model=fam, transport=transport).items[0]
                assert np.array_equal(item.pixel_values, ref_pv), (fam, n)
                assert list(item.grid_thw) == ref_grid[0].tolist()
                assert item.num_tokens == qwen_like_tokens(fam, ref_grid[0])


def test_torchvision_models_equal_transformers_torchvision(client, small_jpegs, tmp_path):
    jobs = [{"cls": f, "kwargs": qwen_like_kwargs(f), "images": [decoded(small_jpegs, n)]}
            for f in FAMILIES for n in NAMES]
    refs = iter(run_oracle(tmp_path, jobs))
    for fam in FAMILIES:
        for n in NAMES:
            ref = next(refs)
            item = client.preprocess(small_jpegs[n], model=f"{fam}_tv",
                                     transport="inline").items[0]
            assert np.array_equal(item.pixel_values, ref["pixel_values"]), (fam, n)
            assert list(item.grid_thw) == ref["grid"][0].tolist()


def test_model_info_names_family_and_backend(client):
    got = {m["name"]: m for m in client.model_info()["models"]}
    for fam in FAMILIES:
        assert got[fam]["backend"] == "pil" and got[f"{fam}_tv"]["backend"] == "torchvision"
