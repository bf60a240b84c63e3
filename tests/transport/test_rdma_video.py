"""Video items over the rdma transport with real NIXL (server in process).

A video's pixel_values_videos is written straight into an RDMA slot, pulled by the client and
exact to the library; a video larger than a slot falls back to shm, counted."""

from __future__ import annotations

import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

pytest.importorskip("av")

from smg_fast.client import Client  # noqa: E402
from smg_fast.processors.loader import load_video_processor  # noqa: E402
from smg_fast.testing.video_clips import make_clip  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

CLIP = make_clip("h264", 160, 96, 24, fps=12)


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): rdma, Qwen2-VL and Qwen3-VL, 16 MiB slots."""
    return dict(models=[("q2", "qwen2_vl"), ("q3", "qwen3_vl")], transport="rdma",
                rdma_slots=2, rdma_slot_bytes=16 * MiB, rdma_min_bytes=0)


@pytest.mark.parametrize(("model", "family", "kwargs"), [
    ("q2", "qwen2_vl", {"fps": 2}), ("q3", "qwen3_vl", {}),
])
def test_a_video_through_a_slot_is_exact(server, puller, model, family, kwargs):
    with Client(server.target, puller=puller, timeout=60) as c:
        out = c.preprocess(videos=CLIP, videos_kwargs=kwargs, model=model, transport="rdma")
    item = out.items[0]
    assert item.transport == "rdma"
    options = {"do_sample_frames": True, "num_frames": None, **kwargs} if kwargs else {}
    ref = load_video_processor(family)(CLIP, return_metadata=True, **options)
    assert np.array_equal(item.pixel_values, ref["pixel_values_videos"])
    assert item.grid_thw == tuple(int(v) for v in ref["video_grid_thw"][0])
    assert item.video["frames_indices"] == list(ref["video_metadata"][0]["frames_indices"])


def _too_large(server) -> float:
    return server.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "too_large", "used": "shm"}) or 0.0


def test_a_video_larger_than_a_slot_falls_back_to_shm(server, puller):
    before = _too_large(server)
    with Client(server.target, puller=puller, timeout=60) as c:
        out = c.preprocess(videos=CLIP, model="q2", transport="rdma")  # every frame: ~29 MiB
    item = out.items[0]
    assert item.transport == "shm" and item.pixel_values.nbytes > 16 * MiB
    ref = load_video_processor("qwen2_vl")(CLIP)
    assert np.array_equal(item.pixel_values, ref["pixel_values_videos"])
    assert _too_large(server) == before + 1
