"""Bit-exact parity of the Pixtral processor with transformers' PixtralImageProcessorPil.

The published mistral-community/pixtral-12b preprocessor_config.json values
(smg_fast.testing.oracles' HUB_PIXTRAL, written out apart from the family module): longest edge
1024, patch 16, BICUBIC, rescale 1/255, CLIP mean / std. pixel_values (N, 3, H, W), zero-padded
to the batch's largest image, and image_sizes are compared with np.array_equal on real photos,
every PIL mode, encoded bytes and paths, an EXIF-rotated JPEG, numpy arrays and edge sizes (tiny
images grow to one patch, odd sides round up), float32, bfloat16 and float16; through
load_processor (by name and from a model folder) and the smg_fast.hf drop-in."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from support.images import encode
from transformers.image_utils import load_image
from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

from smg_fast import load_processor
from smg_fast.errors import CompactFormatError, InvalidImageError, UnsupportedCallError
from smg_fast.processors.families.pixtral import pixtral_size
from smg_fast.testing.oracles import HUB_PIXTRAL, hf_pixtral

# The published preprocessor_config.json (mistral-community/pixtral-12b), as a folder has it.
HUB_FILE = {
    "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_processor_type": "PixtralImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "patch_size": {"height": 16, "width": 16}, "processor_class": "PixtralProcessor",
    "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 1024},
}


@pytest.fixture(scope="module")
def ref():
    return hf_pixtral(PixtralImageProcessorPil)


@pytest.fixture(scope="module")
def pixtral():
    return load_processor("pixtral")


def reference(ref, images, **kw):
    out = ref(images, return_tensors="np", **kw)
    return np.asarray(out["pixel_values"]), np.asarray(out["image_sizes"])


def check(out, want, dtype=np.float32) -> None:
    pv, sizes = want
    got = np.asarray(out["pixel_values"])
    assert got.dtype == dtype and got.shape == pv.shape, (got.shape, pv.shape)
    if dtype != np.float32:
        pv = torch.from_numpy(pv).to({np.uint16: torch.bfloat16,
                                      np.float16: torch.float16}[dtype])
        pv = pv.view(torch.uint16).numpy() if dtype == np.uint16 else pv.numpy()
    bad = got != pv
    assert not bad.any(), f"{bad.mean():.4%} of values differ"
    assert np.asarray(out["image_sizes"]).dtype == np.int64
    assert np.asarray(out["image_sizes"]).tolist() == sizes.tolist()


def test_builtin_is_the_hub_config(pixtral):
    cfg = pixtral.config
    assert (cfg.patch_size, cfg.longest_edge, cfg.resample, cfg.backend) == (16, 1024, 3, "pil")
    assert list(cfg.image_mean) == HUB_PIXTRAL["image_mean"]
    assert list(cfg.image_std) == HUB_PIXTRAL["image_std"]
    assert cfg.rescale_factor == HUB_PIXTRAL["rescale_factor"]


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (15, 17), (37, 53), (1024, 1024), (1025, 1023),
                                  (1920, 1080), (1080, 1920), (3000, 7), (1, 500), (4000, 25),
                                  (2049, 1537), (33, 1100)], ids=str)
def test_resize_rule_is_transformers(size):
    from transformers.models.pixtral.image_processing_pil_pixtral import (
        get_resize_output_image_size,
    )

    w, h = size
    want = get_resize_output_image_size(np.zeros((3, h, w), np.uint8), size=(1024, 1024),
                                        patch_size=(16, 16), input_data_format="channels_first")
    assert pixtral_size(h, w, 1024, 16) == tuple(want)


def test_real_image(real_image_name, real_images, pixtral, ref):
    check(pixtral(real_images.open(real_image_name)),
          reference(ref, real_images.open(real_image_name)))


def test_pil_mode(mode_kind, real_images, pixtral, ref):
    want = reference(ref, real_images.mode_image(mode_kind))
    check(pixtral(real_images.mode_image(mode_kind)), want)


@pytest.mark.parametrize("name", ["rocket", "coffee", "logo2"])
def test_bytes_and_path_input(name, real_images, pixtral, ref):
    """Bytes and paths load as transformers' load_image does."""
    want = reference(ref, load_image(str(real_images.path(name))))
    for src in (real_images.bytes(name), str(real_images.path(name)), real_images.path(name)):
        check(pixtral(src), want)


def test_encoded_jpeg_1080p(real_images, pixtral, ref, overlapped):
    """A 1920x1080 JPEG's bytes, decoded as Pillow does and resized to 1024x576.

    Alone, it is decoded inside the native call that resizes it; in a batch, decoded first."""
    data = encode(real_images.rgb("astronaut").resize((1920, 1080)), "JPEG")
    want = reference(ref, load_image(Image.open(io.BytesIO(data))))
    assert want[1].tolist() == [[576, 1024]]
    for dtype, name in ((np.float32, "float32"), (np.uint16, "bfloat16")):
        check(pixtral(data, dtype=name), want, dtype)
    assert overlapped == [True, True]
    small = real_images.bytes("rocket")
    check(pixtral([data, small]), reference(ref, [load_image(Image.open(io.BytesIO(data))),
                                                  load_image(str(real_images.path("rocket")))]))


def test_exif_rotated_jpeg(exif_rotated_jpeg, pixtral, ref):
    want = reference(ref, load_image(str(exif_rotated_jpeg)))
    check(pixtral(str(exif_rotated_jpeg)), want)
    check(pixtral(exif_rotated_jpeg.read_bytes()), want)


def test_16_bit_png(real_images, pixtral, ref):
    data = encode(real_images.mode_image("I;16"), "PNG")
    check(pixtral(data), reference(ref, load_image(Image.open(io.BytesIO(data)))))


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (15, 17), (37, 53), (1024, 1024), (1025, 1023),
                                  (1920, 1080), (1, 500), (3000, 3), (4000, 25)], ids=str)
def test_edge_sizes_from_arrays(size, real_images, pixtral, ref):
    w, h = size
    arr = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BICUBIC))
    # tiny arrays are ambiguous (3 rows could be channels): say which, to both
    check(pixtral(arr, input_data_format="channels_last"),
          reference(ref, arr, input_data_format="channels_last"))


def test_grey_and_channels_first_arrays(real_images, pixtral, ref):
    grey = np.asarray(real_images.open("camera"))[:, :, None].copy()
    check(pixtral(grey), reference(ref, grey))
    chw = np.ascontiguousarray(real_images.rgb_array("chelsea").transpose(2, 0, 1))
    check(pixtral(chw), reference(ref, chw))


def test_float_images(real_images, pixtral, ref):
    """Float arrays in [0, 1] with do_rescale=False, as transformers reads them."""
    arr = real_images.rgb_array("chelsea").astype(np.float32) / 255
    check(pixtral(arr, do_rescale=False), reference(ref, arr, do_rescale=False))


def test_batch_pads_with_zeros(real_images, pixtral, ref):
    """Images of different sizes: each at the top left of the largest H and W, zeros after."""
    images = [real_images.open("chelsea"), real_images.rgb("rocket").resize((37, 900)),
              real_images.mode_image("RGBA"), real_images.rgb("coffee").resize((1500, 40))]
    want = reference(ref, images)
    check(pixtral(images), want)
    pv, sizes = want
    h, w = sizes[1]
    assert pv.shape[2:] != (h, w) and not pv[1, :, h:, :].any() and not pv[1, :, :, w:].any()
    for dtype, name in ((np.uint16, "bfloat16"), (np.float16, "float16")):
        check(pixtral(images, dtype=name), want, dtype)
    # float images next to uint8 ones: two runs, padded to one canvas
    mixed = [real_images.rgb_array("chelsea").astype(np.float32) / 255,
             real_images.rgb("rocket").resize((37, 900))]
    check(pixtral(mixed, do_rescale=False), reference(ref, mixed, do_rescale=False))


def test_side_scaled_to_zero_is_refused_as_transformers(pixtral, ref):
    """3000x2 scales to a zero height: transformers' resize fails, smg-fast refuses the image."""
    arr = np.zeros((2, 3000, 3), np.uint8)
    with pytest.raises(ValueError):
        ref(arr, return_tensors="np")
    with pytest.raises(InvalidImageError, match="zero side"):
        pixtral(arr)


def test_torch_output_and_tokens(real_images, pixtral, ref):
    images = [real_images.open("chelsea"), real_images.open("camera")]
    want = reference(ref, images)
    out = pixtral(images, return_tensors="pt")
    assert np.array_equal(out["pixel_values"].numpy(), want[0])
    assert out["image_sizes"].tolist() == want[1].tolist()
    assert str(out["image_sizes"].dtype) == "torch.int64"
    h, w = (s // 16 for s in want[1][0])
    assert out["num_tokens"].tolist()[0] == h * (w + 1)  # a break token ends each patch row
    assert pixtral.num_tokens(1920, 1080) == 36 * 65


def test_call_options(real_images, pixtral, ref):
    """size, patch_size, mean / std and the rescale flags as transformers reads them."""
    im = real_images.open("coffee")
    for kw in ({"size": {"longest_edge": 512}}, {"size": {"height": 300, "width": 300}},
               {"patch_size": {"height": 14, "width": 14}}, {"patch_size": 32},
               {"image_mean": [0.1, 0.2, 0.3]}, {"do_normalize": False},
               {"do_rescale": False, "do_normalize": False}, {"resample": 2},
               {"do_pad": True}):
        check(pixtral(im, **kw), reference(ref, im, **kw))
    with pytest.raises(UnsupportedCallError, match="do_pad"):
        pixtral(im, do_pad=False)
    with pytest.raises(UnsupportedCallError, match="size"):
        pixtral(im, size={"height": 300, "width": 200})
    with pytest.raises(UnsupportedCallError, match="square"):
        pixtral(im, patch_size={"height": 16, "width": 8})


def test_compact_format_is_refused(real_images, pixtral):
    """Whole-image channel runs and zero padding: refused whatever the normalization."""
    with pytest.raises(CompactFormatError, match="not a table"):
        pixtral(real_images.open("rocket"), encoding="uint8+lut")
    with pytest.raises(CompactFormatError, match="not a table"):  # pixel 0 maps to +0.0 here
        pixtral(real_images.open("rocket"), encoding="uint8+lut", image_mean=[0.0] * 3,
                image_std=[0.5, 0.25, 0.125])


def test_model_folder_llava_with_pixtral_processor(tmp_path, real_images, ref):
    """The hub's checkpoints say model_type llava: their processor type makes them Pixtral."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    # it names the torchvision class, which transformers' Auto classes resolve (when installed)
    assert load_processor(tmp_path).config.backend == "torchvision"
    proc = load_processor(tmp_path, backend="pil")
    assert proc.config.family == "pixtral" and proc.config.longest_edge == 1024
    im = real_images.open("grace_hopper")
    check(proc(im), reference(ref, real_images.open("grace_hopper")))
    # a plain llava folder (CLIP's processor) is not Pixtral's
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "CLIPImageProcessor", "crop_size": 336}))
    with pytest.raises(ValueError, match="llava"):
        load_processor(tmp_path)


def test_folder_without_model_type_and_class_defaults(tmp_path, real_images):
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "PixtralImageProcessorPil", "size": {"longest_edge": 512}}))
    proc = load_processor(tmp_path)
    assert (proc.config.family, proc.config.backend, proc.config.longest_edge) == ("pixtral",
                                                                                   "pil", 512)
    theirs = PixtralImageProcessorPil.from_pretrained(tmp_path)
    im = real_images.open("coffee")
    check(proc(im), reference(theirs, im))


def test_dropin_equals_transformers(tmp_path, real_images, ref):
    import smg_fast.hf as hf

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    ours = hf.PixtralImageProcessorPil.from_pretrained(tmp_path)
    theirs = PixtralImageProcessorPil.from_pretrained(tmp_path)
    assert ours.model_input_names == ["pixel_values", "image_sizes"]
    images = [real_images.open("rocket"), real_images.open("camera")]
    for rt in ("np", "pt"):
        got, want = ours(images, return_tensors=rt), theirs(images, return_tensors=rt)
        assert set(got) == {"pixel_values", "image_sizes"}
        assert type(got["pixel_values"]) is type(want["pixel_values"])
        assert np.array_equal(np.asarray(got["pixel_values"]), np.asarray(want["pixel_values"]))
        assert np.asarray(got["image_sizes"]).tolist() == np.asarray(
            want["image_sizes"]).tolist()
    got, want = ours(images), theirs(images)  # no return_tensors: a stacked array, size pairs
    assert type(got["pixel_values"]) is type(want["pixel_values"]) is np.ndarray
    assert np.array_equal(got["pixel_values"], want["pixel_values"])
    assert [tuple(s) for s in got["image_sizes"]] == [tuple(s) for s in want["image_sizes"]]
    assert ours._reference is None  # transformers' class was never needed


_AUTO = """
import json, sys
import numpy as np
import smg_fast.hf as hf
from transformers import AutoImageProcessor
from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

assert "pixtral" in hf.register()
proc = AutoImageProcessor.from_pretrained(sys.argv[1])
theirs = PixtralImageProcessorPil.from_pretrained(sys.argv[1])
im = np.random.default_rng(0).integers(0, 256, (300, 1500, 3), dtype=np.uint8)
same = np.array_equal(proc(im, return_tensors="np")["pixel_values"],
                      theirs(im, return_tensors="np")["pixel_values"])
print(type(proc).__module__, type(proc).__name__, same)
"""


def test_auto_image_processor_gives_the_dropin_for_a_llava_pixtral_folder(tmp_path):
    """After smg_fast.hf.register(), AutoImageProcessor gives the drop-in for that folder.

    In a child process: register() changes transformers' process-wide Auto mappings."""
    import smg_fast

    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llava", "vision_config": {"model_type": "pixtral"},
        "text_config": {"model_type": "mistral"}}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    src = str(Path(smg_fast.__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _AUTO, str(tmp_path)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    module, name, same = out.stdout.split()[-3:]
    assert module == "smg_fast.hf" and name.startswith("PixtralImageProcessor") and same == "True"
