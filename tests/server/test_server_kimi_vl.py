"""The service serving Kimi-VL models, named in the request.

A Kimi-VL-A3B-Instruct folder (its hub preprocessor_config.json, as in
tests/parity/test_kimi_vl_parity.py) and the built-in kimi_vl family: each request's output equals
the remote-code processor's steps (tests/support/kimi_vl_upstream.py in the oracle venv) on the
image Image.open reads from the same bytes, inline and through /dev/shm; a repeat is a cache hit; an
image the family refuses is the request's error, not a different tensor.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

grpc = pytest.importorskip("grpc")

from parity.test_kimi_vl_parity import HUB  # noqa: E402
from support.images import encode  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402

from smg_fast.testing.model_folders import make_kimi_vl_folder  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")
NAMES = ("chelsea", "hubble")


@pytest.fixture(scope="module")
def kimi_vl_folder(tmp_path_factory):
    return make_kimi_vl_folder(tmp_path_factory.mktemp("Kimi-VL-A3B-Instruct"))


def server_fields(kimi_vl_folder) -> dict:
    """The module's `server` (tests/conftest.py): the folder, the built-in family, a cache."""
    return dict(models=[("kimi-vl", str(kimi_vl_folder)), ("kimi_vl", "kimi_vl")],
                pixel_cache_mb=64)


@pytest.fixture(scope="module")
def images(real_images, small_jpegs) -> dict[str, bytes]:
    """A small JPEG, and hubble as shipped (1000x872: over the budget, so resized)."""
    return {"chelsea": small_jpegs["chelsea"], "hubble": real_images.bytes("hubble")}


@pytest.fixture(scope="module")
def tv_refs(images, tmp_path_factory):
    jobs = [{"cls": "kimi_vl", "kwargs": HUB, "images": [Image.open(io.BytesIO(images[n]))]}
            for n in NAMES]
    return dict(zip(NAMES, run_oracle(tmp_path_factory.mktemp("kimi_vl_server"), jobs),
                    strict=True))


def test_model_info_names_family_and_backend(client):
    got = {m["name"]: m for m in client.model_info()["models"]}
    for name in ("kimi-vl", "kimi_vl"):
        assert got[name]["family"] == "kimi_vl" and got[name]["backend"] == "upstream"
    assert got["kimi-vl"]["config_fingerprint"] == got["kimi_vl"]["config_fingerprint"]


@pytest.mark.parametrize("transport", ["inline", "shm"])
@pytest.mark.parametrize("model", ["kimi-vl", "kimi_vl"])
def test_requests_equal_the_upstream(client, images, tv_refs, transport, model):
    for n in NAMES:
        item = client.preprocess(images[n], model=model, transport=transport).items[0]
        ref = tv_refs[n]
        assert np.array_equal(item.pixel_values, ref["pixel_values"]), (model, n)
        (h, w), = ref["grid"].tolist()
        assert list(item.grid_thw) == [1, h, w] and item.num_tokens == h * w // 4


def test_a_repeat_is_a_cache_hit(client, images):
    first = client.preprocess(images["hubble"], model="kimi-vl", transport="inline").items[0]
    again = client.preprocess(images["hubble"], model="kimi-vl", transport="inline").items[0]
    assert again.cache_hit and np.array_equal(first.pixel_values, again.pixel_values)


def test_a_refused_mode_is_the_requests_error(client, real_images):
    """A palette PNG pads with its entry 0 upstream: INVALID_ARGUMENT naming the reason."""
    data = encode(real_images.mode_image("P"), "PNG")
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(data, model="kimi-vl", transport="inline")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "pads a P image" in err.value.details()
