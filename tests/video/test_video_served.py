"""A video served by the gRPC service equals transformers' video processor on the same bytes.

The reference runs in the torchvision venv (video_oracle.py): transformers' PyAV loader decodes
the clip, its Qwen2-VL / Qwen3-VL video processor samples and processes it. The service gets the
same bytes as a video item (a real server on 127.0.0.1): pixel_values_videos must be
np.array_equal, and the grid, the sampled frame indices and the fps equal."""

from __future__ import annotations

import numpy as np
import pytest
import video_oracle

pytest.importorskip("grpc")

from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.video_clips import make_clip  # noqa: E402

CLIP = make_clip("h264", 200, 120, 24, fps=12)
# (model, reference class, the item's videos_kwargs, the reference's call options)
CASES = {
    "qwen2-fps2": ("q2", "qwen2", {"fps": 2}, {"do_sample_frames": True, "fps": 2}),
    "qwen3-defaults": ("q3", "qwen3", {}, {}),
}


@pytest.fixture(scope="module")
def tv_refs(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    names = sorted(CASES)
    jobs = [{"cls": CASES[n][1], "kwargs": {}, "video": CLIP, "call": CASES[n][3]}
            for n in names]
    out = video_oracle.run_oracle(tmp_path_factory.mktemp("video_served"), jobs)
    return dict(zip(names, out, strict=True))


@pytest.fixture(scope="module")
def served(start_server):
    """A server of Qwen2-VL (q2) and Qwen3-VL (q3) on 127.0.0.1."""
    return start_server(models=[("q2", "qwen2_vl"), ("q3", "qwen3_vl")])


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("transport", ["inline", "shm"])
def test_served_video_equals_transformers(tv_refs, served, name, transport):
    model, _, kwargs, _ = CASES[name]
    with Client(served.target, timeout=60) as c:
        out = c.preprocess(videos=CLIP, videos_kwargs=kwargs, model=model, transport=transport)
    ref, item = tv_refs[name], out.items[0]
    assert item.transport == transport
    assert np.array_equal(out.video_grid_thw, ref["grid"].astype(np.int64))
    assert item.pixel_values.shape == ref["pixel_values"].shape
    assert np.array_equal(item.pixel_values, ref["pixel_values"])
    assert item.video["frames_indices"] == ref["indices"].tolist()
    assert (item.video["fps"] or -1.0) == float(ref["fps"])
