"""Llama 4 against transformers' Llama4ImageProcessor (torchvision only), bit for bit.

transformers 5.24 with torch 2.14.1 and torchvision 0.29.1 in the oracle venv
(tests/support/tv_oracle.py), configured as Llama-4-Scout's published preprocessor_config.json
(smg_fast.testing.oracles.HUB_LLAMA4): best-fit canvas of up to 16 tiles of 336, torch's uint8
antialiased BILINEAR resize, zero padding right and bottom, rescale and normalize in bfloat16,
the global tile. Real photos, every PIL mode, numpy arrays, encoded bytes (EXIF-rotated JPEG,
16-bit PNG, RGBA PNG), tiny / 1080p / 4000x3000 / extreme-aspect sizes and a batch of mixed
tile counts; transformers' bfloat16 bits against smg-fast's (and the same values in float32),
aspect_ratios, with np.array_equal. The canvas rule is swept against transformers' functions
over sizes and max_patches (support/llama4_geometry_script.py)."""

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
from smg_fast.errors import UnsupportedCallError
from smg_fast.testing.oracles import HUB_LLAMA4

SIZES = ((1, 1), (5, 3), (37, 53), (336, 336), (337, 335), (1920, 1080), (1080, 1920),
         (4000, 3000), (1, 200), (200, 1), (4000, 25), (13, 1100), (1500, 500))
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODE_KINDS]
          + ["np_rgba", "np_grey", "bytes:exif", "bytes:png16", "bytes:rgba_png"])
BATCH = ["size:37x53", "real:chelsea", "size:1920x1080", "mode:RGBA", "size:5x3"]
OTHER = dict(HUB_LLAMA4, max_patches=6, image_mean=[0.48145466, 0.4578275, 0.40821073],
             image_std=[0.26862954, 0.26130258, 0.27577711])
OTHER_INPUTS = ("real:coffee", "size:1920x1080", "mode:LA")


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
        jobs.append({"cls": "llama4", "kwargs": kwargs, "images": [
            for_transformers(make_input(real_images, exif_rotated_jpeg, n)) for n in names]})

    for name in INPUTS:
        add(("hub", name), HUB_LLAMA4, [name])
    add(("hub", "batch"), HUB_LLAMA4, BATCH)
    for name in OTHER_INPUTS:
        add(("other", name), OTHER, [name])
    add(("rescale_only", "real:rocket"), dict(HUB_LLAMA4, do_normalize=False), ["real:rocket"])
    results = run_oracle(tmp_path_factory.mktemp("tv_llama4"), jobs)
    return dict(zip(keys, results, strict=True))


def check(proc, images, ref, **options) -> None:
    """bfloat16 bits (the default), the same values in float32, and aspect_ratios equal."""
    out = proc(images, return_tensors="np", **options)
    bits = out["pixel_values"]
    assert bits.dtype == np.uint16 and bits.shape == ref["bf16"].shape, (bits.shape,
                                                                         ref["bf16"].shape)
    bad = bits != ref["bf16"]
    assert not bad.any(), f"{bad.mean():.4%} of bfloat16 values differ"
    assert out["aspect_ratios"].dtype == np.int64
    assert out["aspect_ratios"].tolist() == ref["grid"].tolist()
    f32 = proc(images, return_tensors="np", dtype="float32", **options)["pixel_values"]
    assert f32.dtype == np.float32 and np.array_equal(f32, ref["pixel_values"])


@pytest.mark.parametrize("name", INPUTS)
def test_llama4_exact(name, real_images, exif_rotated_jpeg, oracle):
    proc = load_processor("llama4", max_image_pixels=None)
    check(proc, [make_input(real_images, exif_rotated_jpeg, name)], oracle[("hub", name)])


def test_llama4_batch_exact(real_images, exif_rotated_jpeg, oracle):
    proc = load_processor("llama4")
    ref = oracle[("hub", "batch")]
    check(proc, [make_input(real_images, exif_rotated_jpeg, n) for n in BATCH], ref)
    assert len({r * c for r, c in ref["grid"].tolist()}) > 2  # one tile, several, many


@pytest.mark.parametrize("name", OTHER_INPUTS)
def test_llama4_other_config_exact(name, real_images, exif_rotated_jpeg, oracle):
    """max_patches 6 and CLIP's mean / std (bfloat16 rounds them): from the config, per call."""
    image = [make_input(real_images, exif_rotated_jpeg, name)]
    ref = oracle[("other", name)]
    proc = load_processor("llama4", max_patches=6, image_mean=OTHER["image_mean"],
                          image_std=OTHER["image_std"])
    check(proc, image, ref)
    check(load_processor("llama4"), image, ref, max_patches=6,
          image_mean=OTHER["image_mean"], image_std=OTHER["image_std"])


def test_llama4_rescale_only_exact(real_images, exif_rotated_jpeg, oracle):
    """do_normalize=False: transformers multiplies the uint8 image in float32, not bfloat16."""
    image = [make_input(real_images, exif_rotated_jpeg, "real:rocket")]
    ref = oracle[("rescale_only", "real:rocket")]
    out = load_processor("llama4")(image, dtype="float32", do_normalize=False)
    assert np.array_equal(out["pixel_values"], ref["pixel_values"])
    assert out["aspect_ratios"].tolist() == ref["grid"].tolist()


def test_llama4_pt_output_is_transformers_shape(real_images):
    """return_tensors="pt": bfloat16 pixel_values [tiles, 3, 336, 336], int64 aspect_ratios."""
    import torch

    out = load_processor("llama4")([real_images.open("chelsea"), real_images.open("camera")],
                                   return_tensors="pt")
    assert out["pixel_values"].dtype == torch.bfloat16
    assert out["aspect_ratios"].dtype == torch.int64
    tiles = sum(r * c + (r * c > 1) for r, c in out["aspect_ratios"].tolist())
    assert tuple(out["pixel_values"].shape) == (tiles, 3, 336, 336)
    assert out["num_tokens"].tolist() == [144 * (r * c + (r * c > 1))
                                          for r, c in out["aspect_ratios"].tolist()]


def test_llama4_refuses_what_it_does_not_compute(real_images):
    proc = load_processor("llama4")
    image = real_images.open("chelsea")
    with pytest.raises(UnsupportedCallError, match="resize_to_max_canvas"):
        proc(image, resize_to_max_canvas=True)
    with pytest.raises(UnsupportedCallError, match="do_resize"):
        proc(image, do_resize=False)
    with pytest.raises(ValueError, match="torchvision"):
        load_processor("llama4", backend="pil")
    with pytest.raises(ValueError, match="max_patches"):
        load_processor("llama4", max_patches=0)


def test_llama4_model_folder(tmp_path, real_images):
    """A folder of config.json (model_type llama4) and the hub's preprocessor_config.json."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama4"}))
    pre = dict(HUB_LLAMA4, image_processor_type="Llama4ImageProcessorFast", do_resize=True,
               do_rescale=True, do_normalize=True, processor_class="Llama4Processor")
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(pre))
    proc = load_processor(str(tmp_path))
    assert proc.config == load_processor("llama4").config
    image = real_images.open("coffee")
    assert np.array_equal(proc(image)["pixel_values"],
                          load_processor("llama4")(image)["pixel_values"])


def test_llama4_canvas_rule_matches_transformers(tmp_path):
    script = Path(__file__).parents[1] / "support" / "llama4_geometry_script.py"
    result = run_with_smg_fast(script, [], tmp_path)
    assert result["checked"] > 4000 and result["bad"] == [], result


def test_dropin_equals_transformers_in_the_oracle_venv(real_images, tmp_path):
    """AutoImageProcessor gives the drop-in; it equals transformers' class for "pt" and None.

    "np" (refused by transformers for bfloat16) gives the bits as uint16
    (support/hf_llama4_script.py)."""
    script = Path(__file__).parents[1] / "support" / "hf_llama4_script.py"
    results = run_with_smg_fast(script, [str(real_images.path(n)) for n in
                                         ("chelsea", "rocket", "logo")], tmp_path)
    assert len(results) == 5 and all(v is True for v in results.values()), results


def test_llama4_refuses_the_calls_transformers_refuses(real_images):
    """transformers' class refuses do_rescale=False with normalize, and non-int max_patches.

    torchvision's normalize takes no uint8 tensor (TypeError); its strict kwargs take an int."""
    import subprocess

    from support.tv_oracle import tv_python

    code = ("import json, numpy as np; from PIL import Image\n"
            "from transformers.models.llama4.image_processing_llama4 import "
            "Llama4ImageProcessor as C\n"
            f"p = C(**{HUB_LLAMA4!r}); im = Image.new('RGB', (700, 300)); out = {{}}\n"
            "for k, kw in (('rescale', {'do_rescale': False}), ('float', {'max_patches': 2.5}),"
            " ('str', {'max_patches': '4'})):\n"
            "    try: p(im, **kw); out[k] = 'computed'\n"
            "    except Exception as e: out[k] = 'TypeError' in repr(e) + str(e)\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([tv_python(), "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs == {"rescale": True, "float": True, "str": True}
    proc = load_processor("llama4")
    image = real_images.open("chelsea")
    with pytest.raises(UnsupportedCallError, match="do_rescale"):
        proc(image, do_rescale=False)
    for bad in (2.5, "4"):
        with pytest.raises(UnsupportedCallError, match="max_patches"):
            proc(image, max_patches=bad)
    assert proc(image, dtype="uint8", do_rescale=False, do_normalize=False)["pixel_values"].size
