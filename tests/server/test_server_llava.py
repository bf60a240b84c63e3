"""LLaVA-NeXT and OneVision through the service: both backends, inline and shm, the cache.

The served outputs equal transformers' LlavaNextImageProcessorPil / LlavaOnevisionImageProcessorPil
(main env) and their torchvision classes (the oracle venv), configured as the published llava-hf
preprocessor_config.json values (HUB_LLAVA). An item is one image as transformers returns it
alone: pixel_values (1, tiles, 3, side, side) (its base tile, then its best-resolution tiles),
grid_thw (1, height, width) (its image_sizes) and the processor's token count."""

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
from transformers.models.llava_next.image_processing_pil_llava_next import (  # noqa: E402
    LlavaNextImageProcessorPil,
)
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (  # noqa: E402,E501
    LlavaOnevisionImageProcessorPil,
)

from smg_fast import load_processor  # noqa: E402
from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.oracles import HUB_LLAVA, hf_llava  # noqa: E402
from smg_fast.testing.servers import ServerProcess  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

NAMES = ["chelsea", "rocket"]
FAMILIES = {"llava_next": LlavaNextImageProcessorPil,
            "llava_onevision": LlavaOnevisionImageProcessorPil}


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): both families on both backends, Qwen2-VL."""
    return dict(models=[("llava_next", "llava_next"),
                        ("llava_next_tv", "llava_next:torchvision"),
                        ("llava_onevision", "llava_onevision"),
                        ("llava_onevision_tv", "llava_onevision:torchvision"),
                        ("qwen", "qwen2_vl")], pixel_cache_mb=64)


@pytest.fixture(scope="module")
def pil_refs(small_jpegs):
    """(family, name) -> (pixel_values, image size) of transformers' PIL class per JPEG."""
    out = {}
    for fam, cls in FAMILIES.items():
        ref = hf_llava(fam, cls)
        for n in NAMES:
            o = ref(load_image(Image.open(io.BytesIO(small_jpegs[n]))), return_tensors="np")
            out[fam, n] = (np.asarray(o["pixel_values"]), tuple(o["image_sizes"][0].tolist()))
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_pil_backend_equals_transformers(client, small_jpegs, pil_refs, family, transport):
    proc = load_processor(family)
    for n in NAMES:
        item = client.preprocess(small_jpegs[n], model=family, transport=transport).items[0]
        want, (h, w) = pil_refs[family, n]
        assert want.shape[1] > 1 and np.array_equal(np.asarray(item.pixel_values), want), n
        assert tuple(item.grid_thw) == (1, h, w)
        assert item.num_tokens == proc.num_tokens(w, h)


@pytest.mark.parametrize("family", FAMILIES)
def test_torchvision_backend_equals_transformers(client, small_jpegs, tmp_path, family):
    equals_torchvision_oracle(client, {n: small_jpegs[n] for n in NAMES}, f"{family}_tv",
                              family, HUB_LLAVA[family], tmp_path)


def test_batch_items_are_unpadded_and_cached(client, small_jpegs, pil_refs):
    """A request's items are each its own image's tiles (the library pads a call's batch)."""
    first = served_twice(client, [small_jpegs[n] for n in NAMES], "llava_next")
    for item, n in zip(first.items, NAMES, strict=True):
        assert np.array_equal(np.asarray(item.pixel_values), pil_refs["llava_next", n][0]), n
    qwen = client.preprocess(small_jpegs["rocket"], model="qwen", transport="inline").items[0]
    assert np.asarray(qwen.pixel_values).ndim == 2


@pytest.mark.parametrize("family", FAMILIES)
def test_verify_compares_with_transformers(client, small_jpegs, family):
    verify_is_exact(client, small_jpegs["chelsea"], family)


def test_server_process_serves_llava_next(small_jpegs, pil_refs, track_pid):
    """python -m smg_fast.server --model llava_next on loopback, both transports."""
    with ServerProcess(["--model", "ln=llava_next", "--workers", "1"]) as srv:
        track_pid(srv.pid)
        with Client(srv.target, timeout=60) as c:
            for transport in ("inline", "shm"):
                item = c.preprocess(small_jpegs["rocket"], model="ln",
                                    transport=transport).items[0]
                assert np.array_equal(np.asarray(item.pixel_values),
                                      pil_refs["llava_next", "rocket"][0])
