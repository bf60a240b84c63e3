"""Phi-4-multimodal against transformers' Phi4MultimodalImageProcessor (torchvision), bit for bit.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py), configured as Phi-4-multimodal-instruct's preprocessor_config.json
(smg_fast.testing.oracles.HUB_PHI4): up to 36 crops of 448, torch's uint8 antialiased BILINEAR
resize to fit the grid, padding with 255, the global image a float32 BICUBIC resize without
antialias of the normalized canvas, batch padding. Real photos, every PIL mode, numpy arrays,
encoded bytes (EXIF-rotated JPEG, 16-bit PNG, RGBA PNG), tiny / 1080p / 4000x3000 /
extreme-aspect sizes and a batch of mixed crop counts: image_pixel_values, image_sizes,
image_attention_mask and num_img_tokens with np.array_equal."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from support.images import MODE_KINDS, REAL_IMAGE_NAMES, encode
from support.tv_oracle import run_oracle, run_with_smg_fast
from transformers.image_utils import load_image

from smg_fast import load_processor
from smg_fast.errors import InvalidImageError, UnsupportedCallError
from smg_fast.testing.oracles import HUB_PHI4

SIZES = ((10, 10), (37, 53), (448, 448), (449, 447), (1920, 1080), (1080, 1920),
         (4000, 3000), (3000, 4000), (5000, 300), (200, 3000), (6000, 20), (1500, 500))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS]
          + ["np_rgba", "np_grey", "bytes:exif", "bytes:png16", "bytes:rgba_png"])
BATCH = ["size:37x53", "real:chelsea", "size:1920x1080", "mode:RGBA", "size:5000x300"]
OTHER = dict(HUB_PHI4, dynamic_hd=6, image_mean=[0.48145466, 0.4578275, 0.40821073],
             image_std=[0.26862954, 0.26130258, 0.27577711])
OTHER_INPUTS = ("real:coffee", "size:1920x1080", "size:4000x3000")


def make_input(images, exif_jpeg, name: str):
    """A named input: a PIL image, a numpy array, or encoded bytes (kind "bytes")."""
    kind, _, arg = name.partition(":")
    if kind == "bytes":
        if arg == "exif":
            return exif_jpeg.read_bytes()
        return encode(images.mode_image("I;16" if arg == "png16" else "RGBA"), "PNG")
    arrays = {"np_rgba": lambda: np.asarray(images.mode_image("RGBA")).copy(),
              "np_grey": lambda: np.asarray(images.open("camera"))[:, :, None].copy()}
    if kind in arrays:
        return arrays[kind]()
    if kind == "size":
        return images.rgb("astronaut").resize(tuple(int(v) for v in arg.split("x")))
    return images.open(arg) if kind == "real" else images.mode_image(arg)


def for_transformers(item):
    """What transformers' class gets: encoded bytes through its load_image."""
    if isinstance(item, bytes):
        return load_image(base64.b64encode(item).decode("ascii"))
    return item


@pytest.fixture(scope="module")
def oracle(real_images, exif_rotated_jpeg, tmp_path_factory):
    jobs, keys = [], []

    def add(key, kwargs, names):
        keys.append(key)
        jobs.append({"cls": "phi4_multimodal", "kwargs": kwargs, "images": [
            for_transformers(make_input(real_images, exif_rotated_jpeg, n)) for n in names]})

    for name in INPUTS:
        add(("hub", name), HUB_PHI4, [name])
    add(("hub", "batch"), HUB_PHI4, BATCH)
    for name in OTHER_INPUTS:
        add(("other", name), OTHER, [name])
    add(("rescale_only", "real:rocket"), dict(HUB_PHI4, do_normalize=False), ["real:rocket"])
    add(("normalize_only", "real:rocket"), dict(HUB_PHI4, do_rescale=False), ["real:rocket"])
    results = run_oracle(tmp_path_factory.mktemp("tv_phi4"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref, **options) -> None:
    """Every output transformers returns, with its name, dtype and shape, equal."""
    out = proc(images, return_tensors="np", **options)
    pixels = out["image_pixel_values"]
    assert pixels.dtype == np.float32 and pixels.shape == ref["pixel_values"].shape, (
        pixels.shape, ref["pixel_values"].shape)
    bad = pixels != ref["pixel_values"]
    assert not bad.any(), f"{bad.mean():.4%} of values differ (per crop: " \
                          f"{bad.reshape(*bad.shape[:2], -1).mean(-1)})"
    assert out["image_sizes"].dtype == np.int64
    assert np.array_equal(out["image_sizes"], ref["grid"])
    assert out["image_attention_mask"].dtype == np.float32
    assert np.array_equal(out["image_attention_mask"], ref["mask"])
    assert out["num_img_tokens"].dtype == np.int64
    assert out["num_img_tokens"].tolist() == ref["tokens"].tolist()
    assert out["num_tokens"].tolist() == ref["tokens"].tolist()


@pytest.mark.parametrize("name", INPUTS)
def test_phi4_exact(name, real_images, exif_rotated_jpeg, oracle):
    proc = load_processor("phi4_multimodal", max_image_pixels=None)
    check(proc, [make_input(real_images, exif_rotated_jpeg, name)], oracle[("hub", name)])


def test_phi4_batch_exact(real_images, exif_rotated_jpeg, oracle):
    """Images of 1 to 36 crops padded to the most: zero crops, all-ones masks."""
    proc = load_processor("phi4_multimodal")
    ref = oracle[("hub", "batch")]
    check(proc, [make_input(real_images, exif_rotated_jpeg, n) for n in BATCH], ref)
    crops = (ref["grid"][:, 0] // 448) * (ref["grid"][:, 1] // 448)
    assert len(set(crops.tolist())) > 2 and ref["pixel_values"].shape[1] == crops.max() + 1


@pytest.mark.parametrize("name", OTHER_INPUTS)
def test_phi4_other_config_exact(name, real_images, exif_rotated_jpeg, oracle):
    """dynamic_hd 6 and CLIP's mean / std: from the config, and per call."""
    image = [make_input(real_images, exif_rotated_jpeg, name)]
    ref = oracle[("other", name)]
    proc = load_processor("phi4_multimodal", dynamic_hd=6, image_mean=OTHER["image_mean"],
                          image_std=OTHER["image_std"])
    check(proc, image, ref)
    check(load_processor("phi4_multimodal"), image, ref, dynamic_hd=6,
          image_mean=OTHER["image_mean"], image_std=OTHER["image_std"])


def test_phi4_rescale_only_exact(real_images, exif_rotated_jpeg, oracle):
    """do_normalize=False: the global image is resized from the rescaled canvas."""
    image = [make_input(real_images, exif_rotated_jpeg, "real:rocket")]
    check(load_processor("phi4_multimodal"), image, oracle[("rescale_only", "real:rocket")],
          do_normalize=False)


def test_phi4_normalize_only_exact(real_images, exif_rotated_jpeg, oracle):
    """do_rescale=False: transformers normalizes the 0..255 canvas (floats), then resizes it."""
    image = [make_input(real_images, exif_rotated_jpeg, "real:rocket")]
    check(load_processor("phi4_multimodal"), image, oracle[("normalize_only", "real:rocket")],
          do_rescale=False)


def test_phi4_neither_rescale_nor_normalize_is_refused(real_images):
    """Neither rescaled nor normalized is refused, per call and from a folder's flags.

    transformers returns uint8 then: the canvas, and a global image torch's bicubic rounds and
    clamps to 0..255, which smg-fast's float global image is not (the drop-in hands such calls
    to transformers: test_dropin_equals_transformers_in_the_oracle_venv)."""
    image = real_images.open("rocket")
    with pytest.raises(UnsupportedCallError, match="do_rescale=False"):
        load_processor("phi4_multimodal")(image, do_rescale=False, do_normalize=False)
    with pytest.raises(UnsupportedCallError, match="do_rescale=False"):
        load_processor("phi4_multimodal", do_normalize=False)(image, do_rescale=False)
    with pytest.raises(UnsupportedCallError, match="do_rescale=False"):
        load_processor("phi4_multimodal", rescale_factor=1.0, do_normalize=False)(image)


def test_phi4_pt_output_is_transformers_shape(real_images):
    import torch

    out = load_processor("phi4_multimodal")([real_images.open("chelsea"),
                                             real_images.open("camera")], return_tensors="pt")
    assert out["image_pixel_values"].dtype == torch.float32
    assert out["image_pixel_values"].shape[:2] == out["image_attention_mask"].shape[:2]
    assert out["image_sizes"].dtype == torch.int64
    assert out["num_img_tokens"].dtype == torch.int64


def test_phi4_refuses_what_it_does_not_compute(real_images):
    proc = load_processor("phi4_multimodal")
    image = real_images.open("chelsea")
    with pytest.raises(UnsupportedCallError, match="float32"):
        proc(image, dtype="bfloat16")
    with pytest.raises(UnsupportedCallError, match="encoding"):
        proc(image, encoding="uint8+lut")
    with pytest.raises(UnsupportedCallError, match="patch_size"):
        proc(image, patch_size=16)
    with pytest.raises(ValueError, match="torchvision"):
        load_processor("phi4_multimodal", backend="pil")
    with pytest.raises(ValueError, match="dynamic_hd"):
        load_processor("phi4_multimodal", dynamic_hd=0)
    for bad in ("x", "36", 2.5, [6], float("nan")):  # not truncated, not parsed: refused
        with pytest.raises(UnsupportedCallError, match="dynamic_hd"):
            proc(image, dynamic_hd=bad)
        with pytest.raises(ValueError, match="dynamic_hd"):
            load_processor("phi4_multimodal", dynamic_hd=bad)
    with pytest.raises(InvalidImageError, match="too extreme"):
        proc(image.resize((4000, 5)))  # transformers raises ValueError for it too
    with pytest.raises(InvalidImageError, match="zero-size|too extreme"):
        proc(np.zeros((0, 5, 3), np.uint8))
    unit = np.asarray(image.convert("RGB"), np.float32) / 255  # as every torchvision family
    with pytest.raises(UnsupportedCallError, match="float32 images"):
        proc([image, unit])


@pytest.mark.parametrize("model_type", ["phi4_multimodal", "phi4mm"])
def test_phi4_model_folder(model_type, tmp_path, real_images):
    """A folder of config.json (either model_type) and the hub's preprocessor_config.json."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    pre = {"dynamic_hd": 36, "image_processor_type": "Phi4MultimodalImageProcessor",
           "processor_class": "Phi4MultimodalProcessor",
           "feature_extractor_type": "Phi4MultimodalFeatureExtractor",
           "audio_compression_rate": 8, "audio_downsample_rate": 1, "audio_feat_stride": 1}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    proc = load_processor(str(tmp_path))
    assert proc.config == load_processor("phi4_multimodal").config
    image = real_images.open("coffee")
    assert np.array_equal(proc(image)["image_pixel_values"],
                          load_processor("phi4_multimodal")(image)["image_pixel_values"])


def test_dropin_equals_transformers_in_the_oracle_venv(real_images, tmp_path):
    """AutoImageProcessor gives the drop-in, equal to transformers' class for "pt", "np", None.

    support/hf_phi4_script.py runs it in the oracle venv."""
    script = Path(__file__).parents[1] / "support" / "hf_phi4_script.py"
    results = run_with_smg_fast(script, [str(real_images.path(n)) for n in
                                         ("chelsea", "rocket", "logo")], tmp_path)
    assert len(results) == 5 and all(v is True for v in results.values()), results


def test_phi4_geometry_matches_transformers(tmp_path):
    """Grids, resize sizes, masks and refusals over a size sweep, as transformers' method.

    support/phi4_geometry_script.py runs the method in the oracle venv."""
    script = Path(__file__).parents[1] / "support" / "phi4_geometry_script.py"
    result = run_with_smg_fast(script, [], tmp_path)
    assert result["checked"] > 5000 and result["bad"] == [], result


def test_phi4mm_original_folder(tmp_path):
    """The original checkpoints' folder (model_type phi4mm, a remote-code class): as the class.

    The reason load_processor gives says the remote class is not what is compared."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "phi4mm"}))
    pre = {"auto_map": {"AutoImageProcessor": "processing_phi4mm.Phi4MMImageProcessor"},
           "image_processor_type": "Phi4MMImageProcessor", "processor_class": "Phi4MMProcessor",
           "feature_extractor_type": "Phi4MMAudioFeatureExtractor", "audio_compression_rate": 8,
           "audio_downsample_rate": 1, "audio_feat_stride": 1, "dynamic_hd": 36}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    proc = load_processor(str(tmp_path))
    assert proc.config == load_processor("phi4_multimodal").config
    assert "remote code" in proc.backend_reason
