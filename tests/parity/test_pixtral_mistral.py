"""Pixtral's backend "upstream" against mistral_common's ImageEncoder, in the vLLM venv.

vLLM serves mistralai/* checkpoints in Mistral's format through mistral_common. Model folders
are written here as those checkpoints ship them: Pixtral-12B-2409's params.json (vision_encoder:
image_size 1024, patch_size 16) alone, and Mistral-Small-3.1-24B-Instruct-2503's params.json
with its tekken.json image section (image_patch_size 14, max_image_size 1540,
spatial_merge_size 2). load_processor on the folder picks the backend; each image's output is
compared with np.array_equal to mistral_common's (OpenCV with IPP off: docs/exactness.md#pixtral),
its token count to the encoder's tokens, and the padding to zeros."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.engine_common import engine_python_or_fail
from support.images import REAL_IMAGE_NAMES
from support.mistral_common_runner import run_mistral_common
from test_torchvision_parity import make_input

from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError

PIXTRAL_12B = {"vision_encoder": {"hidden_size": 1024, "num_channels": 3, "image_size": 1024,
                                  "patch_size": 16, "rope_theta": 10000.0,
                                  "intermediate_size": 4096, "num_hidden_layers": 24,
                                  "num_attention_heads": 16, "image_token_id": 10,
                                  "image_break_token_id": 12, "image_end_token_id": 13}}
SMALL_31 = {"vision_encoder": {"hidden_size": 1024, "num_channels": 3, "max_image_size": 1540,
                               "patch_size": 14, "rope_theta": 10000.0, "intermediate_size": 4096,
                               "num_hidden_layers": 24, "num_attention_heads": 16,
                               "mm_projector_id": "patch_merge", "spatial_merge_size": 2,
                               "image_token_id": 10, "image_break_token_id": 12,
                               "image_end_token_id": 13, "image_size": 1540}}
SMALL_31_TEKKEN = {"image": {"image_patch_size": 14, "max_image_size": 1540,
                             "spatial_merge_size": 2}}
# folder -> (params.json, tekken.json or None, mistral_common's (patch, max size, merge))
FOLDERS = {"pixtral-12b": (PIXTRAL_12B, None, (16, 1024, 1)),
           "small-3.1": (SMALL_31, SMALL_31_TEKKEN, (14, 1540, 2))}
SIZES = [(1, 1), (2, 3), (37, 53), (1300, 1200), (1920, 1080), (4000, 25), (13, 1100),
         (1024, 1024), (1025, 3), (1540, 1541), (3, 3000)]
MODES = ("P", "P_transparency", "LA", "RGBA", "RGB_colorkey", "CMYK", "1", "L")
INPUTS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"size:{w}x{h}" for w, h in SIZES]
          + [f"mode:{k}" for k in MODES])
KEYS = [("pixtral-12b", n) for n in INPUTS] + [("small-3.1", n) for n in INPUTS]


def write_folder(root: Path, name: str) -> Path:
    params, tekken, _ = FOLDERS[name]
    folder = root / name
    folder.mkdir()
    (folder / "params.json").write_text(json.dumps({"dim": 5120, **params}))
    if tekken is not None:
        (folder / "tekken.json").write_text(json.dumps({"config": {"version": "v7"}, **tekken}))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mistral_folders")
    return {name: write_folder(root, name) for name in FOLDERS}


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def encoded(vllm_python, real_images, tmp_path_factory) -> dict:
    """(folder, input) -> mistral_common's (image, tokens)."""
    jobs = [{"encode": make_input(real_images, n), "config": FOLDERS[f][2]} for f, n in KEYS]
    outs = run_mistral_common(vllm_python, tmp_path_factory.mktemp("mistral_common"), jobs)
    return dict(zip(KEYS, outs, strict=True))


@pytest.mark.parametrize("folder,name", KEYS)
def test_equals_mistral_common(folder, name, folders, real_images, encoded):
    proc = load_processor(folders[folder])
    assert proc.config.backend == "upstream"
    image = make_input(real_images, name)
    out = proc(image)
    ref, tokens = encoded[(folder, name)]
    got = out["pixel_values"]
    assert got.dtype == np.float32 and got.shape == (1, *ref.shape)
    assert np.array_equal(got[0], ref), name
    assert out["image_sizes"].tolist() == [list(ref.shape[1:])]
    assert out["num_tokens"].tolist() == [len(tokens)] == [proc.num_tokens(*image.size)]


def test_batch_pads_with_zeros(folders, real_images, encoded):
    names = ["real:chelsea", "size:13x1100", "mode:RGBA", "size:1920x1080"]
    proc = load_processor(folders["small-3.1"])
    out = proc([make_input(real_images, n) for n in names], return_tensors="pt")
    pv = out["pixel_values"].numpy()
    refs = [encoded[("small-3.1", n)][0] for n in names]
    assert pv.shape == (4, 3, max(r.shape[1] for r in refs), max(r.shape[2] for r in refs))
    for i, ref in enumerate(refs):
        _, h, w = ref.shape
        assert np.array_equal(pv[i, :, :h, :w], ref)
        assert not pv[i, :, h:].any() and not pv[i, :, :, w:].any()
    assert out["image_sizes"].numpy().tolist() == [list(r.shape[1:]) for r in refs]
    assert out["num_tokens"].numpy().tolist() == [len(encoded[("small-3.1", n)][1])
                                                  for n in names]


def test_rgb_array_equals_its_image(folders, real_images):
    proc = load_processor(folders["pixtral-12b"])
    image = real_images.rgb("coffee")
    assert np.array_equal(proc(np.asarray(image))["pixel_values"], proc(image)["pixel_values"])


def test_family_name_with_backend(folders, real_images):
    """load_processor("pixtral", backend="upstream") is Pixtral-12B's configuration."""
    image = real_images.rgb("rocket")
    by_name = load_processor("pixtral", backend="upstream")(image)["pixel_values"]
    assert np.array_equal(by_name, load_processor(folders["pixtral-12b"])(image)["pixel_values"])


@pytest.mark.parametrize("call,match", [
    (lambda p, im: p(im.tobytes()), "PIL images"),
    (lambda p, im: p(np.zeros((4, 4, 4), np.uint8)), "RGB arrays"),
    (lambda p, im: p(im, size={"longest_edge": 512}), "call options"),
    (lambda p, im: p(im, dtype="bfloat16"), "float32"),
    (lambda p, im: p(im, return_tensors="tf"), "return_tensors"),
])
def test_refused_calls(call, match, folders):
    proc = load_processor(folders["pixtral-12b"])
    with pytest.raises(UnsupportedCallError, match=match):
        call(proc, Image.new("RGB", (8, 8)))


@pytest.mark.parametrize("tekken", [{"image": {"image_patch_size": 0, "max_image_size": 1024}},
                                    {"image": {"image_patch_size": 16, "max_image_size": "1024"}}])
def test_bad_folder_values_raise(tekken, tmp_path):
    (tmp_path / "params.json").write_text(json.dumps(PIXTRAL_12B))
    (tmp_path / "tekken.json").write_text(json.dumps(tekken))
    with pytest.raises(ValueError, match="positive integer"):
        load_processor(tmp_path)


def test_native_pipeline_and_service_refuse_it(folders, real_images):
    """plan_batch (the service's path) refuses the backend; so does the service's model set."""
    from smg_fast.server.models import ModelSet

    proc = load_processor(folders["pixtral-12b"])
    with pytest.raises(UnsupportedCallError, match="library call"):
        proc.plan_batch(real_images.bytes("chelsea"))
    with pytest.raises(ValueError, match="--model m=.*library call"):
        ModelSet([("m", str(folders["pixtral-12b"]))], 0)


def test_compact_format_and_other_dtypes_are_refused(folders):
    import torch

    from smg_fast import CompactFormatError

    proc = load_processor(folders["pixtral-12b"])
    image = Image.new("RGB", (20, 10))
    with pytest.raises(CompactFormatError, match="not a table"):
        proc(image, encoding="uint8+lut")
    for dtype in ("float32", np.float32, torch.float32):
        assert proc(image, dtype=dtype)["pixel_values"].dtype == np.float32
    with pytest.raises(UnsupportedCallError, match="float32"):
        proc(image, dtype=torch.float16)


def test_folder_with_both_formats(folders, real_images, tmp_path):
    """A folder with transformers' files too: transformers' reading, or Mistral's for upstream.

    Without Mistral's consolidated weights it is read as transformers reads it; with
    backend="upstream", or with consolidated*.safetensors, in Mistral's format (tekken.json's
    unit, 28 here)."""
    folder = tmp_path / "both"
    folder.mkdir()
    (folder / "params.json").write_text(json.dumps(SMALL_31))
    (folder / "tekken.json").write_text(json.dumps(SMALL_31_TEKKEN))
    (folder / "config.json").write_text(json.dumps({"model_type": "llava"}))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "PixtralImageProcessor", "size": {"longest_edge": 1540},
         "patch_size": {"height": 14, "width": 14}}))
    assert load_processor(folder).config.backend == "torchvision"
    proc = load_processor(folder, backend="upstream")
    assert (proc.config.patch_size, proc.config.longest_edge) == (28, 1540)
    image = real_images.rgb("chelsea")
    want = load_processor(folders["small-3.1"])(image)["pixel_values"]
    assert np.array_equal(proc(image)["pixel_values"], want)
    # with Mistral's weights present, vLLM's "auto" config format picks Mistral's: so does this
    (folder / "consolidated.safetensors").write_bytes(b"")
    assert load_processor(folder).config.backend == "upstream"
    assert load_processor(folder).config.patch_size == 28
