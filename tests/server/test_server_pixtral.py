"""Pixtral through the service: both backends, inline and shm, the cache, a server process.

The process is ``python -m smg_fast.server`` on loopback; the compact format is refused.

The served outputs equal transformers' PixtralImageProcessorPil (main env) and
PixtralImageProcessor (the oracle venv), configured as mistral-community/pixtral-12b's
preprocessor_config.json (HUB_PIXTRAL). An item is one image: its (1, 3, h, w) pixel_values,
unpadded, its grid (1, h / 16, w / 16) and rows * (columns + 1) tokens."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("grpc")

import grpc  # noqa: E402
from PIL import Image  # noqa: E402
from support.served_family import (  # noqa: E402
    equals_torchvision_oracle,
    served_twice,
    verify_is_exact,
)
from transformers.image_utils import load_image  # noqa: E402
from transformers.models.pixtral.image_processing_pil_pixtral import (  # noqa: E402
    PixtralImageProcessorPil,
)

from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.oracles import HUB_PIXTRAL, hf_pixtral  # noqa: E402
from smg_fast.testing.servers import ServerProcess  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): Pixtral on both backends, Qwen2-VL."""
    return dict(models=[("pixtral", "pixtral"), ("pixtral_tv", "pixtral:torchvision"),
                        ("qwen", "qwen2_vl")], pixel_cache_mb=64)


@pytest.fixture(scope="module")
def pil_refs(small_jpegs):
    """name -> (pixel_values, image_sizes) of PixtralImageProcessorPil for each small JPEG."""
    ref = hf_pixtral(PixtralImageProcessorPil)
    outs = {n: ref(load_image(Image.open(io.BytesIO(small_jpegs[n]))), return_tensors="np")
            for n in NAMES}
    return {n: (np.asarray(o["pixel_values"]), o["image_sizes"][0].tolist())
            for n, o in outs.items()}


@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, pil_refs, transport):
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model="pixtral", transport=transport).items[0]
        want, (h, w) = pil_refs[n]
        assert np.array_equal(np.asarray(item.pixel_values), want), n
        assert tuple(item.grid_thw) == (1, h // 16, w // 16)
        assert item.num_tokens == h // 16 * (w // 16 + 1)


def test_torchvision_backend_equals_transformers(client, small_jpegs, tmp_path):
    equals_torchvision_oracle(client, {n: small_jpegs[n] for n in NAMES}, "pixtral_tv",
                              "pixtral", HUB_PIXTRAL, tmp_path)


def test_batch_is_unpadded_items_and_cached(client, small_jpegs, pil_refs):
    """A request's items are each its own image, unpadded (the library pads a call's batch)."""
    first = served_twice(client, [small_jpegs[n] for n in NAMES], "pixtral")
    for item, n in zip(first.items, NAMES, strict=True):
        assert np.array_equal(np.asarray(item.pixel_values), pil_refs[n][0]), n
    assert first.items[0].pixel_values.shape != first.items[1].pixel_values.shape
    with pytest.raises(ValueError, match="cannot be joined"):  # no raw concatenate error
        _ = first.pixel_values


def test_compact_encoding_is_refused(client, small_jpegs):
    with pytest.raises(grpc.RpcError) as err:
        client.preprocess(small_jpegs["rocket"], model="pixtral", transport="inline",
                          encoding="uint8+lut")
    assert "not a table" in err.value.details()


def test_verify_compares_with_transformers(client, small_jpegs):
    verify_is_exact(client, small_jpegs["chelsea"], "pixtral")


def test_server_process_serves_pixtral(small_jpegs, pil_refs, track_pid):
    """python -m smg_fast.server --model pixtral on loopback, both transports."""
    with ServerProcess(["--model", "px=pixtral", "--workers", "1"]) as srv:
        track_pid(srv.pid)
        with Client(srv.target, timeout=60) as c:
            for transport in ("inline", "shm"):
                item = c.preprocess(small_jpegs["rocket"], model="px",
                                    transport=transport).items[0]
                assert np.array_equal(np.asarray(item.pixel_values), pil_refs["rocket"][0])
