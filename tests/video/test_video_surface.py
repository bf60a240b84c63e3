"""The library surface: ``proc(videos=...)`` beside images, and a model folder's video settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

import smg_fast
from smg_fast.errors import UnsupportedCallError
from smg_fast.processors.loader import load_video_processor
from smg_fast.testing.model_folders import make_qwen_folder
from smg_fast.testing.video_clips import make_clip

CLIP = make_clip("h264", 160, 96, 24, fps=12)


def test_videos_beside_images_in_one_call():
    proc = smg_fast.load_processor("qwen2_vl")
    image = np.full((64, 96, 3), 77, np.uint8)
    both = proc(image, videos=CLIP, videos_kwargs={"do_sample_frames": True, "fps": 2})
    alone = proc(image)
    video = load_video_processor("qwen2_vl")(CLIP, do_sample_frames=True, fps=2)
    assert np.array_equal(both["pixel_values"], alone["pixel_values"])
    assert np.array_equal(both["pixel_values_videos"], video["pixel_values_videos"])
    assert np.array_equal(both["video_grid_thw"], video["video_grid_thw"])
    t, h, w = both["video_grid_thw"][0]
    assert both["num_video_tokens"][0] == t * h * w // 4


def test_videos_alone_and_torch_output():
    torch = pytest.importorskip("torch")
    out = smg_fast.load_processor("qwen3_vl")(videos=CLIP, return_tensors="pt")
    assert isinstance(out["pixel_values_videos"], torch.Tensor)
    assert out["video_grid_thw"].dtype == torch.int64


def test_a_qwen2_folder_without_video_config_uses_its_image_budget(tmp_path):
    """As AutoVideoProcessor: no video_preprocessor_config.json, preprocessor_config.json's."""
    folder = make_qwen_folder(tmp_path / "q25", "qwen2_5_vl")
    proc = smg_fast.load_processor(folder)
    got = proc(videos=CLIP)["pixel_values_videos"]
    cfg = proc.video_processor.config
    assert (cfg.min_pixels, cfg.max_pixels) == (3136, 12845056)
    ref = load_video_processor("qwen2_5_vl", min_pixels=3136, max_pixels=12845056)(CLIP)
    assert np.array_equal(got, ref["pixel_values_videos"])


def test_a_video_preprocessor_config_wins(tmp_path):
    folder = make_qwen_folder(tmp_path / "q3", "qwen3_vl")
    (folder / "video_preprocessor_config.json").write_text(json.dumps(
        {"size": {"shortest_edge": 4096, "longest_edge": 100000}, "fps": 3, "patch_size": 16,
         "video_processor_type": "Qwen3VLVideoProcessor"}))
    cfg = load_video_processor(folder).config
    assert (cfg.min_pixels, cfg.max_pixels, cfg.fps) == (4096, 100000, 3)


def test_settings_are_found_as_transformers_finds_them(tmp_path):
    """Nested video_processor, then video_preprocessor_config.json, then the image file."""
    from transformers.models.auto.video_processing_auto import get_video_processor_config

    folder = make_qwen_folder(tmp_path / "q3n", "qwen3_vl")
    layers = [("video_preprocessor_config.json", {"fps": 3, "size": {
                  "shortest_edge": 4096, "longest_edge": 100000}}),
              ("processor_config.json", {"processor_class": "Qwen3VLProcessor"}),
              ("processor_config.json", {"video_processor": {"fps": 1, "size": {
                  "shortest_edge": 8192, "longest_edge": 200000}}})]
    for name, content in layers:
        (folder / name).write_text(json.dumps(content))
        theirs = get_video_processor_config(str(folder))
        cfg = load_video_processor(folder).config
        assert (cfg.fps, cfg.min_pixels, cfg.max_pixels) == (
            theirs["fps"], theirs["size"]["shortest_edge"], theirs["size"]["longest_edge"])
    assert (cfg.fps, cfg.min_pixels) == (1, 8192)


def test_video_settings_smg_fast_cannot_reproduce_fail_the_video_call_only(tmp_path):
    folder = make_qwen_folder(tmp_path / "q2", "qwen2_vl")
    pre = json.loads((folder / "preprocessor_config.json").read_text())
    (folder / "preprocessor_config.json").write_text(json.dumps({**pre, "resample": 2}))
    proc = smg_fast.load_processor(folder, backend="torchvision")
    assert proc(np.zeros((40, 40, 3), np.uint8))["pixel_values"].size
    with pytest.raises(ValueError, match="resample=3"):
        proc(videos=CLIP)


def test_a_family_without_videos_says_so():
    with pytest.raises(UnsupportedCallError, match="no video processor"):
        smg_fast.load_processor("kimi_k25")(videos=CLIP)


def test_unknown_video_options_are_refused():
    with pytest.raises(UnsupportedCallError, match="do_center_crop"):
        load_video_processor("qwen2_vl")(CLIP, do_center_crop=True)
