"""Phi-4-multimodal through the service: inline and shm, the cache, refusals.

The served outputs equal transformers' Phi4MultimodalImageProcessor in the oracle venv
(torchvision only), configured as Phi-4-multimodal-instruct's preprocessor_config.json
(HUB_PHI4): each image served alone is its global image then its crops, (3, 448, 448) float32
each (transformers' image_pixel_values[0]); grid_thw [1, resized height, resized width] and
num_img_tokens as num_tokens."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

from PIL import Image  # noqa: E402
from support.images import encode  # noqa: E402
from support.served_family import served_twice  # noqa: E402
from support.tv_oracle import run_oracle  # noqa: E402

from smg_fast.testing.oracles import HUB_PHI4  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket", "logo2"]  # two JPEGs, a PNG with transparency


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): Phi-4-multimodal, Qwen2-VL."""
    return dict(models=[("phi4", "phi4_multimodal"), ("qwen", "qwen2_vl")], pixel_cache_mb=64)


@pytest.fixture(scope="module")
def encoded(real_images) -> dict[str, bytes]:
    """Real photos as JPEG, and the transparent logo as PNG, at their own sizes."""
    return {n: encode(real_images.open(n), "PNG") if n == "logo2"
            else encode(real_images.rgb(n), "JPEG", quality=90) for n in NAMES}


@pytest.fixture(scope="module")
def tv_refs(encoded, tmp_path_factory):
    """name -> transformers' outputs for the image alone."""
    from transformers.image_utils import load_image

    jobs = [{"cls": "phi4_multimodal", "kwargs": HUB_PHI4,
             "images": [load_image(Image.open(io.BytesIO(encoded[n])))]} for n in NAMES]
    return dict(zip(NAMES, run_oracle(tmp_path_factory.mktemp("tv_phi4_srv"), jobs),
                    strict=True))


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_served_equals_transformers(client, encoded, tv_refs, transport):
    for n in NAMES:
        ref = tv_refs[n]
        item = client.preprocess(encoded[n], model="phi4", transport=transport).items[0]
        assert np.array_equal(np.asarray(item.pixel_values), ref["pixel_values"][0]), n
        _, h, w = item.grid_thw
        canvas = [-(-h // 448) * 448, -(-w // 448) * 448]
        assert [canvas] == ref["grid"].tolist(), n
        assert item.num_tokens == int(ref["tokens"][0]), n


def test_what_it_does_not_compute_is_refused(client, encoded):
    for kwargs in ({"dtype": "bfloat16"}, {"encoding": "uint8+lut"}):
        with pytest.raises(Exception, match="float32|phi4_multimodal") as info:
            client.preprocess(encoded["chelsea"], model="phi4", **kwargs)
        assert "INVALID_ARGUMENT" in str(info.value), info.value


def test_batch_cache_and_routing_by_model(client, encoded, tv_refs):
    data = [encoded[n] for n in NAMES]
    first = served_twice(client, data, "phi4")
    for item, n in zip(first.items, NAMES, strict=True):
        crops = np.asarray(item.pixel_values)
        ref = tv_refs[n]["pixel_values"][0]
        # each item is planned alone: its own image's rows, as transformers gives it alone (no
        # padding to the request's most crops, which would also reach the cache)
        assert crops.shape == ref.shape and np.array_equal(crops, ref), n
    qwen = client.preprocess(data[0], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).shape[1:] != (3, 448, 448)


def test_a_folder_it_never_computes_is_refused_at_start(tmp_path):
    """Rescale and normalize both off (transformers returns uint8): --model fails, naming why."""
    import json

    from smg_fast.server.models import ModelSet

    config = dict(HUB_PHI4, do_rescale=False, do_normalize=False,
                  image_processor_type="Phi4MultimodalImageProcessor")
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="--model phi4=.*do_rescale=False"):
        ModelSet([("phi4", str(tmp_path))], 0)
    ModelSet([("phi4", "phi4_multimodal")], 0)  # the published settings load
