"""encoding="uint8+lut" over the rdma transport with real NIXL (server in process).

The uint8 codes go through an RDMA slot like any tensor (a quarter of float32's bytes), the
table rides in the message, and the pulled result expands to exactly the plain output."""

from __future__ import annotations

import io

import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast import CompactTensor, expand
from smg_fast.client import Client

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): rdma, Qwen2-VL, Kimi and Gemma 3 (torchvision)."""
    return dict(models=[("qwen2_vl", "qwen2_vl"), ("kimi", "kimi_k25"),
                        ("gemma", "gemma3:torchvision")], transport="rdma", rdma_slots=2,
                rdma_slot_bytes=32 * MiB, rdma_min_bytes=0, rdma_caller_slots=2)


def test_compact_through_a_slot_is_exact(server, puller, real_images, ours):
    buf = io.BytesIO()
    real_images.rgb("astronaut").resize((1280, 720)).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    specs = {"qwen2_vl": ("qwen2_vl", {}), "kimi": ("kimi_k25", {}),
             "gemma": ("gemma3", {"backend": "torchvision"})}
    with Client(server.target, puller=puller, timeout=60) as c:
        for model, (family, kw) in specs.items():
            for dtype in ("float32", "bfloat16"):
                out = c.preprocess(data, model=model, dtype=dtype, transport="rdma",
                                   encoding="uint8+lut")
                item = out.items[0]
                assert item.transport == "rdma" and isinstance(item.pixel_values, CompactTensor)
                want = ours(family, **kw)(data, dtype=dtype)["pixel_values"]
                assert np.array_equal(expand(item.pixel_values).view(np.uint8),
                                      want.view(np.uint8)), (model, dtype)
                plain = c.preprocess(data, model=model, dtype=dtype, transport="rdma")
                assert plain.items[0].transport == "rdma"
                assert np.asarray(item.pixel_values.codes).nbytes * (
                    4 if dtype == "float32" else 2) == np.asarray(plain.pixel_values).nbytes
