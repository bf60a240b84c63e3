"""The service serving GLM-4.1V / GLM-4.6V models, named in the request.

A GLM-4.1V model folder (GLM-4.1V-9B-Thinking's published preprocessor_config.json numbers,
smg_fast.testing.oracles.HUB_GLM; it names Glm4vImageProcessor, so the torchvision backend), the
same folder with ``:pil``, and the built-in glm46v family: each request's output equals
transformers' class of that backend (the PIL classes here, the torchvision class in the oracle
venv), inline and through /dev/shm, with a request narrowing the pixel budget and the pixel
cache answering a repeat.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

pytest.importorskip("grpc")

from support.tv_oracle import run_oracle  # noqa: E402
from transformers.image_utils import load_image  # noqa: E402
from transformers.models.glm4v.image_processing_pil_glm4v import (  # noqa: E402
    Glm4vImageProcessorPil,
)
from transformers.models.glm46v.image_processing_pil_glm46v import (  # noqa: E402
    Glm46VImageProcessorPil,
)

from smg_fast.testing.oracles import glm_kwargs, hf_glm  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")
NAMES = ("chelsea", "rocket")


@pytest.fixture(scope="module")
def glm_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("GLM-4.1V-9B-Thinking")
    (folder / "preprocessor_config.json").write_text(
        json.dumps({**glm_kwargs("glm4v"), "image_processor_type": "Glm4vImageProcessor"}))
    (folder / "config.json").write_text(json.dumps({"model_type": "glm4v"}))
    return folder


def server_fields(glm_folder) -> dict:
    """The module's `server` (tests/conftest.py): the folder on both backends, glm46v, a cache."""
    return dict(models=[("glm", str(glm_folder)), ("glm_pil", f"{glm_folder}:pil"),
                        ("glm46v", "glm46v")], pixel_cache_mb=64)


def pil_reference(cls, family, data: bytes, **call):
    image = load_image(base64.b64encode(data).decode("ascii"))
    out = hf_glm(cls, family)(image, return_tensors="np", **call)
    return np.asarray(out["pixel_values"]), np.asarray(out["image_grid_thw"])


def test_model_info_names_family_and_backend(client):
    got = {m["name"]: m for m in client.model_info()["models"]}
    assert got["glm"]["backend"] == "torchvision" and got["glm_pil"]["backend"] == "pil"
    assert got["glm46v"]["backend"] == "pil"
    assert got["glm"]["config_fingerprint"] != got["glm_pil"]["config_fingerprint"]


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_models_equal_transformers(client, small_jpegs, transport):
    for model, cls, family in (("glm_pil", Glm4vImageProcessorPil, "glm4v"),
                               ("glm46v", Glm46VImageProcessorPil, "glm46v")):
        for n in NAMES:
            item = client.preprocess(small_jpegs[n], model=model, transport=transport).items[0]
            ref_pv, ref_grid = pil_reference(cls, family, small_jpegs[n])
            assert np.array_equal(item.pixel_values, ref_pv), (model, n)
            assert [list(item.grid_thw)] == ref_grid.tolist()
            _, gh, gw = item.grid_thw
            assert item.num_tokens == gh * gw // 4


def test_torchvision_model_equals_transformers(client, small_jpegs, tmp_path):
    images = [load_image(base64.b64encode(small_jpegs[n]).decode("ascii")) for n in NAMES]
    refs = run_oracle(tmp_path, [{"cls": "glm4v", "kwargs": glm_kwargs("glm4v"), "images": [im]}
                                 for im in images])
    for n, ref in zip(NAMES, refs, strict=True):
        item = client.preprocess(small_jpegs[n], model="glm", transport="shm").items[0]
        assert np.array_equal(item.pixel_values, ref["pixel_values"]), n
        assert [list(item.grid_thw)] == ref["grid"].tolist()


def test_a_request_narrows_the_budget(client, small_jpegs):
    data = small_jpegs["rocket"]
    item = client.preprocess(data, model="glm_pil", min_pixels=50_000, max_pixels=200_000,
                             transport="inline").items[0]
    ref_pv, ref_grid = pil_reference(Glm4vImageProcessorPil, "glm4v", data,
                                     size={"shortest_edge": 50_000, "longest_edge": 200_000})
    assert np.array_equal(item.pixel_values, ref_pv)
    assert [list(item.grid_thw)] == ref_grid.tolist()


def test_a_repeat_is_a_cache_hit(client, small_jpegs):
    data = small_jpegs["chelsea"]
    first = client.preprocess(data, model="glm_pil", transport="inline").items[0]
    again = client.preprocess(data, model="glm_pil", transport="inline").items[0]
    assert again.cache_hit and np.array_equal(first.pixel_values, again.pixel_values)
