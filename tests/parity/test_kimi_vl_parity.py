"""Kimi-VL (moonshotai/Kimi-VL-A3B-*) against its remote-code KimiVLImageProcessor's steps.

The oracle is tests/support/kimi_vl_upstream.py run with torch + torchvision 0.29.1 and Pillow
in the oracle venv: PIL BICUBIC resize in the image's own mode, torchvision's pad, to_tensor of
convert("RGB") and normalize. The hub config is moonshotai/Kimi-VL-A3B-Instruct's
preprocessor_config.json (in_token_limit 4096, patch 14, merge_kernel_size [2, 2], pad_input
true, mean / std 0.5); Kimi-VL-A3B-Thinking-2506 raises the budget to 16384 patches (3.2 MP, 4x,
as its model card says). Real photos, PIL modes, arrays, bytes and paths, tiny / odd / 1080p /
4K / extreme-aspect sizes and a batch, float32 and bfloat16 bits, with np.array_equal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from parity.test_torchvision_parity import make_input as corpus_input
from PIL import Image
from support.images import MODE_KINDS, REAL_IMAGE_NAMES
from support.tv_oracle import run_oracle

from smg_fast import load_processor
from smg_fast.errors import InvalidImageError, UnsupportedCallError
from smg_fast.testing.model_folders import KIMI_VL_PREPROCESSOR, make_kimi_vl_folder
from smg_fast.testing.oracles import HUB_KIMI_VL, kimi_vl_upstream

# the oracle's constructor arguments: the hub's, less what the remote class ignores
HUB = {k: v for k, v in KIMI_VL_PREPROCESSOR.items() if k not in ("auto_map",
                                                                    "num_pooled_tokens")}
THINKING_2506 = {**HUB, "in_token_limit": 16384}
# KimiVLImageProcessor's class defaults (OpenAI CLIP mean / std), with the hub's padding
CLIP = {**HUB, "in_token_limit": 4095, "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711]}
SIZES = ((1, 1), (13, 15), (29, 27), (600, 400), (1920, 1080), (3840, 2160), (4, 2000),
         (2000, 6), (3000, 29), (281, 2872), (925, 900), (7140, 20))
# Modes the remote code pads to black after convert("RGB") (no resize at these sizes)
EXACT_MODES = ("LA", "RGBA", "RGB_colorkey", "I;16", "1", "L")
REFUSED_MODES = ("P", "P_transparency", "CMYK")  # padded with palette entry 0 / white
assert set(EXACT_MODES) | set(REFUSED_MODES) == set(MODE_KINDS)
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in EXACT_MODES] + ["np_rgb", "np_rgba", "grey_resized"])
CLIP_INPUTS = ("real:astronaut", "size:1920x1080", "mode:RGBA")
BATCH = ["size:29x27", "real:hubble", "size:29x27", "mode:RGBA", "real:coffee"]


def make_input(images, name: str):
    """A named input: the torchvision corpus's, an RGB array, or a grey image over the budget."""
    if name == "np_rgb":
        return images.rgb_array("china")
    if name == "grey_resized":  # an L image over the budget: resized in L, as in RGB
        return images.open("camera").resize((1500, 1100), Image.Resampling.BILINEAR)
    return corpus_input(images, name)


@pytest.fixture(scope="module")
def oracle(real_images, tmp_path_factory):
    cases = [(name, HUB) for name in INPUTS] + [("batch", HUB)]
    cases += [(name, THINKING_2506) for name in ("real:retina", "size:3840x2160")]
    cases += [(name, CLIP) for name in CLIP_INPUTS]
    jobs = []
    for name, cfg in cases:
        images = ([make_input(real_images, n) for n in BATCH] if name == "batch"
                  else [make_input(real_images, name)])
        jobs.append({"cls": "kimi_vl", "kwargs": cfg, "images": images})
    results = run_oracle(tmp_path_factory.mktemp("tv_oracle_kimi_vl"), jobs)
    return {(name, cfg["in_token_limit"]): r for (name, cfg), r in zip(cases, results,
                                                                       strict=True)}


def check(proc, images, ref) -> None:
    """Same patches (float32 and bfloat16 bits), grids and token counts as the oracle."""
    out = proc(images, return_tensors="np")
    hws = ref["grid"]
    assert np.asarray(out["image_grid_hws"]).tolist() == hws.tolist()
    assert np.asarray(out["image_grid_thw"]).tolist() == [[1, h, w] for h, w in hws.tolist()]
    assert np.asarray(out["num_tokens"]).tolist() == [h * w // 4 for h, w in hws.tolist()]
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32 and pv.shape == ref["pixel_values"].shape
    bad = pv != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    bf = np.asarray(proc(images, return_tensors="np", dtype="bfloat16")["pixel_values"])
    assert bf.dtype == np.uint16 and np.array_equal(bf, ref["bf16"]), "bfloat16 bits differ"


@pytest.fixture(scope="module")
def kimi_vl():
    return load_processor("kimi_vl", max_image_pixels=None)


@pytest.mark.parametrize("name", INPUTS)
def test_exact(name, real_images, oracle, kimi_vl):
    check(kimi_vl, [make_input(real_images, name)], oracle[(name, 4096)])


def test_batch_exact(real_images, oracle, kimi_vl):
    check(kimi_vl, [make_input(real_images, n) for n in BATCH], oracle[("batch", 4096)])


@pytest.mark.parametrize("name", ["real:retina", "size:3840x2160"])
def test_thinking_2506_budget_exact(name, real_images, oracle):
    proc = load_processor("kimi_vl", in_patch_limit=16384)
    check(proc, [make_input(real_images, name)], oracle[(name, 16384)])


@pytest.mark.parametrize("name", CLIP_INPUTS)
def test_other_mean_std_exact(name, real_images, oracle):
    """CLIP mean / std: to_tensor's division and normalize's, in float32, not a reciprocal."""
    proc = load_processor("kimi_vl", image_mean=CLIP["image_mean"], image_std=CLIP["image_std"],
                          in_patch_limit=CLIP["in_token_limit"])
    check(proc, [make_input(real_images, name)], oracle[(name, CLIP["in_token_limit"])])


@pytest.mark.parametrize("name", [n for n in INPUTS if not n.startswith("np_")])
def test_numpy_reference_is_the_upstream(name, real_images, oracle):
    """smg_fast.testing.oracles.kimi_vl_upstream (the benchmarks' reference) equals the oracle."""
    assert HUB == {**HUB_KIMI_VL, "pad_input": True}
    pv = kimi_vl_upstream(make_input(real_images, name))
    assert np.array_equal(pv, oracle[(name, 4096)]["pixel_values"])


@pytest.mark.parametrize("name", ["rocket", "hubble", "logo2"])
def test_bytes_and_paths_exact(name, real_images, oracle, kimi_vl):
    """Encoded files read as Image.open reads them (hubble, 1000x872, is resized)."""
    ref = oracle[(f"real:{name}", 4096)]
    for source in (real_images.bytes(name), str(real_images.path(name)), real_images.path(name)):
        check(kimi_vl, [source], ref)


def test_sizes_by_hand(kimi_vl):
    """The budget arithmetic on worked examples (computed by hand, not by either side)."""
    # 600x400: 42 x 28 = 1176 patches, kept; padded to 616x420
    assert kimi_vl.grid(600, 400) == (1, 30, 44) and kimi_vl.num_tokens(600, 400) == 330
    # 1920x1080: 137 x 77 = 10549 > 4096, scale 0.62312 -> 1196x672, padded to 1204x672
    assert kimi_vl.grid(1920, 1080) == (1, 48, 86) and kimi_vl.num_tokens(1920, 1080) == 1032
    # 1x1: no patch at all, so no resize; padded to one 28x28 merge cell
    assert kimi_vl.grid(1, 1) == (1, 2, 2) and kimi_vl.num_tokens(1, 1) == 1


@pytest.mark.parametrize("w,h", [(7150, 20), (20, 7150), (7168, 14)])
def test_position_embedding_limit_refused(w, h, kimi_vl):
    """511 patches a side is the most: 7150 -> padded 7168 = 512 patches is refused."""
    with pytest.raises(InvalidImageError, match="position embedding"):
        kimi_vl(np.zeros((h, w, 3), np.uint8))
    assert kimi_vl.grid(7140, 20) == (1, 2, 510)


@pytest.mark.parametrize("kind", REFUSED_MODES)
def test_modes_padded_otherwise_refused(kind, real_images, kimi_vl):
    """A palette pads with its entry 0 and CMYK with white: refused, not computed as RGB."""
    image = real_images.mode_image(kind)
    with pytest.raises(InvalidImageError, match="pads a"):
        kimi_vl(image)
    kimi_vl(image.convert("RGB"))  # what the error asks for works


def test_alpha_resized_refused(real_images, kimi_vl):
    """Pillow resizes RGBA premultiplied: over the budget an RGBA image is refused."""
    big = real_images.mode_image("RGBA").resize((1200, 900))
    with pytest.raises(InvalidImageError, match="resizes a RGBA"):
        kimi_vl(big)
    with pytest.raises(InvalidImageError, match="resizes a RGBA"):
        kimi_vl(np.asarray(big).copy())


def test_rescale_is_fixed(real_images, kimi_vl):
    with pytest.raises(UnsupportedCallError, match="kimi_vl's upstream"):
        kimi_vl(real_images.open("coffee"), rescale_factor=1 / 127)


def test_model_folder(tmp_path, real_images, oracle):
    """A Kimi-VL-A3B-Instruct folder: config.json's model_type, the hub preprocessor values."""
    folder = make_kimi_vl_folder(tmp_path)
    proc = load_processor(folder)
    assert proc.config.family == "kimi_vl" and proc.config.backend == "upstream"
    check(proc, [make_input(real_images, "real:chelsea")], oracle[("real:chelsea", 4096)])
    (folder / "config.json").write_text(json.dumps({"model_type": "unknown"}))
    assert load_processor(folder).config.family == "kimi_vl"  # the auto_map names the class


def test_center_crop_mode_refused(tmp_path):
    """pad_input false (the class default: a center crop) is refused, not padded."""
    with pytest.raises(ValueError, match="pad_input"):
        load_processor(make_kimi_vl_folder(tmp_path, pad_input=False))
