"""Video processors: smg-fast's against transformers' Qwen2-VL / Qwen3-VL video processors.

The reference runs in the torchvision venv (video_oracle.py): encoded clips are decoded there by
transformers' own PyAV loader, then sampled and processed by its video processor; smg-fast gets
the same bytes (or the same frames). pixel_values_videos must be np.array_equal, and the grid,
the sampled indices and the metadata fps equal."""

from __future__ import annotations

import numpy as np
import pytest
import video_oracle

from smg_fast.errors import InvalidVideoError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.video_clips import make_clip, scene_frame, texture

HUB_QWEN2 = {"min_pixels": 3136, "max_pixels": 12845056}  # Qwen2/2.5-VL preprocessor_config


def _clip(w: int = 200, h: int = 120, n: int = 24, fps: int = 12) -> bytes:
    return make_clip("h264", w, h, n, fps=fps)


# (reference class, its kwargs, our family, the video, call options)
CASES = {
    "qwen2-defaults-fps2": ("qwen2", {}, "qwen2_vl", _clip(), {"do_sample_frames": True,
                                                              "fps": 2}),
    "qwen2-all-frames-odd": ("qwen2", {}, "qwen2_vl", _clip(96, 64, 5, 5), {}),
    "qwen2-num-frames": ("qwen2", {}, "qwen2_vl", _clip(), {"do_sample_frames": True,
                                                            "num_frames": 7}),
    "qwen2-cap": ("qwen2", {"cap_pixels_per_frame": True, "max_video_tokens": 200},
                  "qwen2_vl", _clip(), {"do_sample_frames": True, "fps": 3}),
    "qwen2.5-hub": ("qwen2", HUB_QWEN2, "qwen2_5_vl", _clip(150, 90, 12, 6),
                    {"do_sample_frames": True, "fps": 2}),
    "qwen2-odd-size": ("qwen2", {}, "qwen2_vl", make_clip("h264", 57, 31, 6, fps=6,
                                                          pix_fmt="yuv444p"), {}),
    "qwen2-one-frame": ("qwen2", {}, "qwen2_vl", _clip(96, 64, 1, 1), {}),
    "qwen2-hevc": ("qwen2", {}, "qwen2_vl", make_clip("hevc", 160, 90, 20, fps=10),
                   {"do_sample_frames": True, "fps": 3}),
    "qwen3-defaults": ("qwen3", {}, "qwen3_vl", _clip(), {}),
    "qwen3-num-frames": ("qwen3", {}, "qwen3_vl", _clip(), {"num_frames": 9, "fps": None}),
    "qwen3-cap": ("qwen3", {"cap_pixels_per_frame": True}, "qwen3_vl", _clip(320, 180, 30, 10),
                  {}),
    "qwen3-tiny": ("qwen3", {}, "qwen3_vl", make_clip("h264", 20, 10, 8, fps=8,
                                                      pix_fmt="yuv444p"), {}),
    "qwen3-vp9": ("qwen3", {}, "qwen3_vl", make_clip("vp9", 128, 72, 10, fps=5), {}),
}
# transformers' loader cannot count WebM frames: the reference gets the frames decoded by a
# plain PyAV loop plus the metadata the container gives.
FRAME_CASES = {"qwen3-vp9"}


def _frames_and_meta(data: bytes):
    import io

    import av

    with av.open(io.BytesIO(data)) as c:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])
        rate = float(c.streams.video[0].average_rate)
    return frames, {"total_num_frames": len(frames), "fps": rate,
                    "duration": len(frames) / rate, "height": frames.shape[1],
                    "width": frames.shape[2]}


def _job(name: str) -> dict:
    cls, kwargs, _, video, call = CASES[name]
    if name in FRAME_CASES:
        video, meta = _frames_and_meta(video)
        call = {**call, "video_metadata": meta}
    return {"cls": cls, "kwargs": kwargs, "video": video, "call": call}


@pytest.fixture(scope="module")
def tv_refs(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    names = sorted(CASES)
    out = video_oracle.run_oracle(tmp_path_factory.mktemp("video_oracle"),
                                  [_job(n) for n in names])
    return dict(zip(names, out, strict=True))


def _ours(name: str) -> dict:
    _, kwargs, family, video, call = CASES[name]
    vp = load_video_processor(family, **kwargs)
    if name in FRAME_CASES:
        frames, meta = _frames_and_meta(video)
        return vp(frames, video_metadata=meta, return_metadata=True, **call)
    return vp(video, return_metadata=True, **call)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pixel_values_videos_equal_transformers(tv_refs, name):
    ref, got = tv_refs[name], _ours(name)
    assert np.array_equal(got["video_grid_thw"], ref["grid"].astype(np.int64))
    assert got["pixel_values_videos"].dtype == np.float32
    assert got["pixel_values_videos"].shape == ref["pixel_values"].shape
    assert np.array_equal(got["pixel_values_videos"], ref["pixel_values"])
    meta = got["video_metadata"][0]
    assert list(meta["frames_indices"]) == ref["indices"].tolist()
    assert (meta["fps"] or -1.0) == float(ref["fps"])


def test_frames_in_equal_bytes_in():
    """A 4-D array, a list of arrays and a list of PIL frames give the same output."""
    from PIL import Image

    pic = texture(160, 100, seed=3)
    frames = np.stack([scene_frame(pic, 96, 64, i) for i in range(6)])
    vp = load_video_processor("qwen2_vl")
    a = vp(frames)["pixel_values_videos"]
    b = vp(list(frames))["pixel_values_videos"]
    c = vp([Image.fromarray(f) for f in frames])["pixel_values_videos"]
    d = vp(frames.transpose(0, 3, 1, 2))["pixel_values_videos"]
    assert np.array_equal(a, b) and np.array_equal(a, c) and np.array_equal(a, d)


def test_a_batch_is_its_videos_in_order():
    vp = load_video_processor("qwen3_vl")
    one, two = _clip(96, 64, 8, 8), _clip(128, 72, 12, 6)
    both = vp([one, two])
    parts = [vp(v)["pixel_values_videos"] for v in (one, two)]
    assert np.array_equal(both["pixel_values_videos"], np.concatenate(parts))
    assert both["video_grid_thw"].shape == (2, 3)


def test_qwen3_refuses_a_one_frame_video_as_transformers_does():
    vp = load_video_processor("qwen3_vl")
    with pytest.raises(InvalidVideoError, match="temporal patch"):
        vp(_clip(96, 64, 1, 1))


def test_qwen3_num_frames_beside_its_own_fps_raises_as_transformers_does():
    """Qwen3-VL's class passes its fps=2 along with a call's num_frames: mutually exclusive."""
    vp = load_video_processor("qwen3_vl")
    with pytest.raises(ValueError, match="mutually exclusive"):
        vp(_clip(), num_frames=8)
    assert vp(_clip(), num_frames=8, fps=None)["video_grid_thw"][0, 0] == 4
