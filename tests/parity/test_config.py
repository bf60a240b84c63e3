"""load_processor.

Built-in families, HF model folders, overrides, fingerprints, and the token arithmetic (num_tokens /
grid) checked against transformers' own smart_resize."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorPil,
    smart_resize,
)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

QWEN2_PREPROCESSOR = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
}
QWEN3_PREPROCESSOR = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
KIMI_PREPROCESSOR = {
    "auto_map": {"AutoProcessor": "kimi_k25_processor.KimiK25Processor"},
    "media_proc_cfg": {
        "in_patch_limit": 16384,
        "patch_size": 14,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "merge_kernel_size": [2, 2],
        "patch_limit_on_one_side": 512,
        "in_patch_limit_each_frame": 4096,
        "temporal_merge_kernel_size": 4,
        "sample_fps": 2.0,
        "config_type": "image",
    },
}


def write_model_dir(root, preprocessor: dict, model_type: str | None):
    root.mkdir(parents=True, exist_ok=True)
    (root / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    if model_type is not None:
        (root / "config.json").write_text(
            json.dumps({"model_type": model_type, "architectures": ["X"]})
        )
    return root


def kimi_grid(w, h, limit=16384, side=512, patch=14, merge=2):
    pw, ph = float(max(1, w // patch)), float(max(1, h // patch))
    scale = min(1.0, math.sqrt(limit / (pw * ph)), side * patch / w, side * patch / h)
    nw = min(max(1, int(w * scale)), side * patch)
    nh = min(max(1, int(h * scale)), side * patch)
    f = merge * patch
    return 1, (nh + (f - nh % f) % f) // patch, (nw + (f - nw % f) % f) // patch


def hf_grid(hf: Qwen2VLImageProcessorPil, w: int, h: int):
    factor = hf.patch_size * hf.merge_size
    rh, rw = smart_resize(
        h, w, factor=factor, min_pixels=hf.size["shortest_edge"], max_pixels=hf.size["longest_edge"]
    )
    grid = (1, rh // hf.patch_size, rw // hf.patch_size)
    assert hf.get_number_of_image_patches(h, w) == grid[1] * grid[2]
    return grid


# ---------------------------------------------------------------------------------------------
# Built-in families
# ---------------------------------------------------------------------------------------------


def test_families(smg):
    # the first built-ins; test_registry names every family in order
    assert smg.FAMILIES[:4] == ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25")
    assert "gemma3" in smg.FAMILIES  # the full order: test_registry
    for fam in smg.FAMILIES:
        assert smg.load_processor(fam).config.family == fam


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
def test_builtin_qwen2(family, ours):
    c = ours(family).config
    assert (c.patch_size, c.merge_size, c.temporal_patch_size) == (14, 2, 2)
    assert (c.min_pixels, c.max_pixels) == (3136, 12845056)
    assert list(c.image_mean) == CLIP_MEAN and list(c.image_std) == CLIP_STD


def test_builtin_qwen3(ours):
    c = ours("qwen3_vl").config
    assert (c.patch_size, c.merge_size, c.temporal_patch_size) == (16, 2, 2)
    assert (c.min_pixels, c.max_pixels) == (65536, 16777216)
    assert list(c.image_mean) == [0.5] * 3 and list(c.image_std) == [0.5] * 3


def test_builtin_kimi(ours):
    c = ours("kimi_k25").config
    assert c.family == "kimi_k25"
    assert c.patch_size == 14 and c.merge_size == 2
    assert list(c.image_mean) == [0.5] * 3 and list(c.image_std) == [0.5] * 3


def test_config_is_frozen(ours):
    c = ours("qwen2_vl").config
    assert dataclasses.is_dataclass(c)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.max_pixels = 1  # type: ignore[misc]


def test_fingerprint(smg):
    a = smg.load_processor("qwen2_vl").config.fingerprint
    b = smg.load_processor("qwen2_vl").config.fingerprint
    assert isinstance(a, str) and a == b and len(a) >= 8
    int(a, 16)  # hex
    prints = {
        a,
        smg.load_processor("qwen2_vl", max_pixels=1003520).config.fingerprint,
        smg.load_processor("qwen2_vl", image_mean=[0.5] * 3).config.fingerprint,
        smg.load_processor("qwen3_vl").config.fingerprint,
        smg.load_processor("kimi_k25").config.fingerprint,
        smg.load_processor("kimi_k25", in_patch_limit=4096).config.fingerprint,
    }
    assert len(prints) == 6, "different configs must have different fingerprints"


def test_unknown_family(smg, tmp_path):
    with pytest.raises(ValueError):
        smg.load_processor("mllama")
    with pytest.raises((ValueError, FileNotFoundError)):
        smg.load_processor(str(tmp_path / "no_such_dir"))
    d = write_model_dir(tmp_path / "llama", QWEN2_PREPROCESSOR, "llama")
    with pytest.raises(ValueError):
        smg.load_processor(d)


def test_unknown_override_rejected(smg):
    with pytest.raises((TypeError, ValueError)):
        smg.load_processor("qwen2_vl", no_such_option=3)


@pytest.mark.parametrize(
    "overrides",
    [{"patch_size": 0}, {"image_std": [0.5, 0.0, 0.5]}, {"image_mean": [0.5, 0.5]}],
    ids=["patch0", "std0", "mean_len2"],
)
def test_invalid_overrides_rejected(smg, overrides):
    with pytest.raises(ValueError):
        smg.load_processor("qwen2_vl", **overrides)


# ---------------------------------------------------------------------------------------------
# HF model folders
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen2_folder(model_type, tmp_path, smg, real_images, assert_equal):
    d = write_model_dir(tmp_path / model_type, QWEN2_PREPROCESSOR, model_type)
    proc = smg.load_processor(d, backend="pil")
    c = proc.config
    assert c.family == model_type
    assert (c.min_pixels, c.max_pixels, c.patch_size) == (3136, 12845056, 14)
    assert list(c.image_mean) == CLIP_MEAN and list(c.image_std) == CLIP_STD
    assert smg.load_processor(str(d), backend="pil").config == c  # str and Path alike

    hf = Qwen2VLImageProcessorPil.from_pretrained(d)
    ref = hf(real_images.open("rocket"), return_tensors="np")
    out = proc(real_images.open("rocket"), return_tensors="np")
    assert_equal(out["pixel_values"], ref["pixel_values"])
    assert np.asarray(out["image_grid_thw"]).tolist() == ref["image_grid_thw"].tolist()


def test_qwen2_folder_without_config_json(tmp_path, smg):
    d = write_model_dir(tmp_path / "noconfig", QWEN2_PREPROCESSOR, None)
    c = smg.load_processor(d).config
    assert c.family in ("qwen2_vl", "qwen2_5_vl")
    assert (c.min_pixels, c.max_pixels, c.patch_size) == (3136, 12845056, 14)


def test_qwen3_folder(tmp_path, smg, real_images, assert_equal):
    d = write_model_dir(tmp_path / "q3", QWEN3_PREPROCESSOR, "qwen3_vl")
    proc = smg.load_processor(d, backend="pil")
    c = proc.config
    assert c.family == "qwen3_vl"
    assert (c.min_pixels, c.max_pixels, c.patch_size, c.merge_size) == (65536, 16777216, 16, 2)
    assert list(c.image_mean) == [0.5] * 3

    hf = Qwen2VLImageProcessorPil.from_pretrained(d)
    assert hf.size["shortest_edge"] == 65536 and hf.patch_size == 16
    ref = hf(real_images.open("grace_hopper"), return_tensors="np")
    out = proc(real_images.open("grace_hopper"), return_tensors="np")
    assert_equal(out["pixel_values"], ref["pixel_values"])


@pytest.mark.parametrize(
    "extra",
    [
        {"min_pixels": 4 * 784, "max_pixels": 256 * 784},  # non-default values in the file
        {"size": {"shortest_edge": 3136, "longest_edge": 12845056}, "max_pixels": 200704},  # both
        {"min_pixels": 200704},
    ],
    ids=["small_max", "size_and_max_pixels", "large_min"],
)
def test_folder_values_match_hf_from_pretrained(extra, tmp_path, smg, real_images, assert_equal):
    pre = {k: v for k, v in QWEN2_PREPROCESSOR.items() if k not in ("min_pixels", "max_pixels")}
    pre.update(extra)
    d = write_model_dir(tmp_path / "custom", pre, "qwen2_vl")
    hf = Qwen2VLImageProcessorPil.from_pretrained(d)
    proc = smg.load_processor(d, backend="pil")
    assert proc.config.min_pixels == hf.size["shortest_edge"]
    assert proc.config.max_pixels == hf.size["longest_edge"]
    for w, h in [(640, 480), (1920, 1080), (100, 3000), (33, 33)]:
        assert tuple(proc.grid(w, h)) == hf_grid(hf, w, h), (w, h)
    ref = hf(real_images.open("chelsea"), return_tensors="np")
    out = proc(real_images.open("chelsea"), return_tensors="np")
    assert_equal(out["pixel_values"], ref["pixel_values"])


def test_kimi_folder(tmp_path, smg):
    d = write_model_dir(tmp_path / "kimi", KIMI_PREPROCESSOR, "kimi_k25")
    proc = smg.load_processor(d)
    c = proc.config
    assert c.family == "kimi_k25"
    assert c.patch_size == 14 and c.merge_size == 2
    assert tuple(proc.grid(600, 400)) == (1, 30, 44)
    assert proc.num_tokens(600, 400) == 330


def test_kimi_folder_values_used(tmp_path, smg):
    pre = json.loads(json.dumps(KIMI_PREPROCESSOR))
    pre["media_proc_cfg"]["in_patch_limit"] = 1024
    pre["media_proc_cfg"]["patch_limit_on_one_side"] = 64
    pre["media_proc_cfg"]["merge_kernel_size"] = 2  # scalar form too
    d = write_model_dir(tmp_path / "kimi_small", pre, "kimi_k25")
    proc = smg.load_processor(d)
    for w, h in [(600, 400), (2000, 100), (50, 5000), (1, 1)]:
        assert tuple(proc.grid(w, h)) == kimi_grid(w, h, limit=1024, side=64), (w, h)
    # an override wins over the file
    proc2 = smg.load_processor(d, in_patch_limit=16384, patch_limit_on_one_side=512)
    assert tuple(proc2.grid(600, 400)) == (1, 30, 44)


def test_overrides_win_over_folder(tmp_path, smg):
    d = write_model_dir(tmp_path / "q2", QWEN2_PREPROCESSOR, "qwen2_vl")
    proc = smg.load_processor(d, max_pixels=50176, min_pixels=12544, image_mean=[0.5] * 3)
    c = proc.config
    assert (c.min_pixels, c.max_pixels) == (12544, 50176)
    assert list(c.image_mean) == [0.5] * 3 and list(c.image_std) == CLIP_STD
    rh, rw = smart_resize(1080, 1920, factor=28, min_pixels=12544, max_pixels=50176)
    assert tuple(proc.grid(1920, 1080)) == (1, rh // 14, rw // 14)


def test_overrides_on_family(smg):
    proc = smg.load_processor("qwen3_vl", patch_size=14, max_pixels=1003520)
    c = proc.config
    assert (c.patch_size, c.max_pixels, c.min_pixels) == (14, 1003520, 65536)
    rh, rw = smart_resize(1080, 1920, factor=28, min_pixels=65536, max_pixels=1003520)
    assert tuple(proc.grid(1920, 1080)) == (1, rh // 14, rw // 14)


# ---------------------------------------------------------------------------------------------
# Token arithmetic (no pixels): transformers' smart_resize worked examples, checked against it
# ---------------------------------------------------------------------------------------------

WORKED = [
    # family, (w, h), expected resized (w, h), expected grid
    ("qwen2_vl", (640, 480), (644, 476), (1, 34, 46)),
    ("qwen2_vl", (1920, 1080), (1932, 1092), (1, 78, 138)),
    ("qwen2_vl", (1, 200), (28, 812), (1, 58, 2)),
    ("qwen2_vl", (200, 1), (812, 28), (1, 2, 58)),
    ("qwen2_vl", (1280, 720), (1288, 728), (1, 52, 92)),
    ("qwen2_vl", (3840, 2160), (3836, 2156), (1, 154, 274)),
    ("qwen2_5_vl", (640, 480), (644, 476), (1, 34, 46)),
    ("qwen3_vl", (1920, 1080), (1920, 1088), (1, 68, 120)),
    ("qwen3_vl", (10, 10), (256, 256), (1, 16, 16)),
]


@pytest.mark.parametrize("family,size,resized,grid", WORKED)
def test_worked_examples(family, size, resized, grid, ours, hf_qwen):
    w, h = size
    hf = hf_qwen(family)
    factor = hf.patch_size * 2
    rh, rw = smart_resize(
        h, w, factor=factor, min_pixels=hf.size["shortest_edge"], max_pixels=hf.size["longest_edge"]
    )
    assert (rw, rh) == resized  # the page agrees with transformers
    assert hf_grid(hf, w, h) == grid
    proc = ours(family)
    assert tuple(proc.grid(w, h)) == grid
    assert proc.num_tokens(w, h) == grid[1] * grid[2] // 4
    assert isinstance(proc.num_tokens(w, h), int)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_grid_sweep_against_transformers(family, ours, hf_qwen):
    hf = hf_qwen(family)
    proc = ours(family)
    rng = np.random.default_rng(11)
    sizes = [(int(w), int(h)) for w, h in rng.integers(1, 5000, size=(400, 2))]
    sizes += [(int(w), int(h)) for w, h in rng.integers(1, 60, size=(100, 2))]
    sizes += [(w, h) for w in (14, 27, 28, 29, 42, 70, 98, 126, 3584) for h in (28, 56, 70, 4004)]
    checked = 0
    for w, h in sizes:
        if max(w, h) / min(w, h) > 200:
            continue
        assert tuple(proc.grid(w, h)) == hf_grid(hf, w, h), (w, h)
        checked += 1
    assert checked > 400


def test_half_to_even_rounding(ours):
    """70/28 = 2.5 rounds to 2 (56) and 98/28 = 3.5 rounds to 4 (112): Python's round."""
    assert tuple(ours("qwen2_vl").grid(70, 98)) == (1, 8, 4)
    assert smart_resize(98, 70, factor=28) == (112, 56)


def test_num_tokens_matches_processing(real_images, ours):
    for fam in ("qwen2_vl", "qwen3_vl", "kimi_k25"):
        proc = ours(fam)
        im = real_images.open("hubble")
        out = proc(im, return_tensors="np")
        assert [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1)] == [
            proc.num_tokens(*im.size)
        ]
        assert np.asarray(out["image_grid_thw"]).tolist() == [list(proc.grid(*im.size))]
