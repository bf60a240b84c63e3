"""InternVL with backend="upstream" against vLLM's own InternVL processor, in the vLLM venv.

vLLM serves the original (non -hf) InternVL checkpoints with its InternVLChatImageProcessor
(vllm/transformers_utils/processors/internvl.py): Pillow's BICUBIC resize onto the closest-ratio
grid of 448 tiles (its own candidate order), a thumbnail, then ToTensor and Normalize with the
ImageNet mean / std, configured as those checkpoints' config.json (max_dynamic_patch 12,
min_dynamic_patch 1, use_thumbnail, dynamic_image_size). Its output for RGB images, PIL modes
without transparency and encoded bytes loaded by vLLM's ImageMediaIO (EXIF-rotated JPEG, 16-bit
PNG) is compared with np.array_equal; inputs with transparency are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.engine_common import engine_python_or_fail, jpeg
from support.images import REAL_IMAGE_NAMES, encode
from support.vllm_internvl import run_vllm_internvl
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError

SIZES = [(1, 1), (2, 3), (37, 53), (1300, 1200), (1920, 1080), (1344, 1344), (4000, 25),
         (13, 1100)]
RGB_NAMES = [n for n in REAL_IMAGE_NAMES if n not in ("logo", "logo2")]  # the RGBA ones refuse
INPUTS = ([f"real:{n}" for n in RGB_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in ("P", "CMYK", "I;16", "1", "L")]
          + ["jpeg:exif6", "png:16bit", "jpeg:grey"])
BOUNDS = {"hub": (1, 12), "fewer": (2, 6)}
# (tile bounds, input): the hub's bounds on every input, other bounds on the first few
KEYS = [("hub", n) for n in INPUTS] + [("fewer", n) for n in INPUTS[:6]]


def make(images, name: str):
    """A named input: test_torchvision_parity's PIL inputs, or encoded bytes (each side loads)."""
    encoded = {"jpeg:exif6": lambda: jpeg(images.rgb("coffee"), exif_orientation=6),
               "png:16bit": lambda: encode(images.mode_image("I;16"), "PNG"),
               "jpeg:grey": lambda: jpeg(images.rgb("rocket").convert("L"))}
    return encoded[name]() if name in encoded else make_input(images, name)


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def vllm_results(vllm_python, real_images, tmp_path_factory):
    """(bounds, input name) -> vLLM's (pixel_values_flat, image_num_patches)."""
    jobs = [{"image": make(real_images, n), "min": BOUNDS[b][0], "max": BOUNDS[b][1]}
            for b, n in KEYS]
    outs = run_vllm_internvl(vllm_python, tmp_path_factory.mktemp("vllm_internvl"), jobs)
    return dict(zip(KEYS, outs, strict=True))


@pytest.mark.parametrize("bounds,name", KEYS)
def test_equals_vllm(bounds, name, real_images, vllm_results):
    lo, hi = BOUNDS[bounds]
    proc = load_processor("internvl", backend="upstream", min_patches=lo, max_patches=hi)
    out = proc(make(real_images, name))
    pv, tiles = vllm_results[(bounds, name)]
    got = np.asarray(out["pixel_values"])
    assert got.shape == pv.shape and np.array_equal(got, pv), name
    assert np.asarray(out["num_patches"]).tolist() == tiles.tolist()


@pytest.mark.parametrize("name", ["logo2", "logo"])
def test_transparency_is_refused(name, real_images):
    proc = load_processor("internvl", backend="upstream")
    for item in (real_images.open(name), real_images.bytes(name),
                 np.asarray(real_images.mode_image("RGBA"))):
        with pytest.raises(UnsupportedCallError, match="transparency"):
            proc(item)
