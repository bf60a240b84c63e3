"""Bit-exact parity of the Gemma 3 processor with transformers' Gemma3ImageProcessorPil.

The published google/gemma-3-4b-it preprocessor_config.json values (smg_fast.testing.oracles'
HUB_GEMMA3, written out apart from the family module): size 896x896, BILINEAR, rescale 1/255,
mean = std = 0.5, pan-and-scan off. pixel_values (N, 3, 896, 896) float32 and num_crops are
compared with np.array_equal, on real photos, every PIL mode, encoded bytes and paths, an
EXIF-rotated JPEG, numpy arrays and edge sizes; through load_processor (by name and from a model
folder) and the smg_fast.hf drop-in."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from support.images import encode
from transformers.image_utils import load_image
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError
from smg_fast.testing.oracles import HUB_GEMMA3, hf_gemma3

# The published Gemma 3 preprocessor_config.json (google/gemma-3-4b-it), as a model folder has it.
HUB_FILE = {
    "do_convert_rgb": None, "do_normalize": True, "do_pan_and_scan": None, "do_rescale": True,
    "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Gemma3ImageProcessor",
    "image_seq_length": 256, "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None, "pan_and_scan_min_ratio_to_activate": None,
    "processor_class": "Gemma3Processor", "resample": 2, "rescale_factor": 0.00392156862745098,
    "size": {"height": 896, "width": 896},
}


@pytest.fixture(scope="module")
def ref():
    return hf_gemma3(Gemma3ImageProcessorPil)


@pytest.fixture(scope="module")
def gemma():
    return load_processor("gemma3")


def reference(ref, images, **kw):
    out = ref(images, return_tensors="np", **kw)
    return np.asarray(out["pixel_values"]), np.asarray(out["num_crops"])


def check(out, want) -> None:
    pv, crops = want
    got = np.asarray(out["pixel_values"])
    assert got.dtype == np.float32 and got.shape == pv.shape, (got.shape, pv.shape)
    bad = got != pv
    assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
    assert np.asarray(out["num_crops"]).dtype == np.int64
    assert np.asarray(out["num_crops"]).tolist() == crops.tolist()


def test_builtin_is_the_hub_config(gemma):
    cfg = gemma.config
    assert (cfg.patch_size, cfg.resample, cfg.backend) == (896, 2, "pil")
    assert list(cfg.image_mean) == HUB_GEMMA3["image_mean"]
    assert list(cfg.image_std) == HUB_GEMMA3["image_std"]
    assert cfg.rescale_factor == HUB_GEMMA3["rescale_factor"]


def test_real_image(real_image_name, real_images, gemma, ref):
    image = real_images.open(real_image_name)
    check(gemma(image), reference(ref, real_images.open(real_image_name)))


def test_pil_mode(mode_kind, real_images, gemma, ref):
    want = reference(ref, real_images.mode_image(mode_kind))
    check(gemma(real_images.mode_image(mode_kind)), want)


@pytest.mark.parametrize("name", ["rocket", "coffee", "logo2"])
def test_bytes_and_path_input(name, real_images, gemma, ref):
    """Bytes and paths load as transformers' load_image does."""
    want = reference(ref, load_image(str(real_images.path(name))))
    for src in (real_images.bytes(name), str(real_images.path(name)), real_images.path(name)):
        check(gemma(src), want)


def test_exif_rotated_jpeg(exif_rotated_jpeg, gemma, ref):
    want = reference(ref, load_image(str(exif_rotated_jpeg)))
    check(gemma(str(exif_rotated_jpeg)), want)
    check(gemma(exif_rotated_jpeg.read_bytes()), want)


def test_16_bit_png(real_images, gemma, ref):
    data = encode(real_images.mode_image("I;16"), "PNG")
    check(gemma(data), reference(ref, load_image(Image.open(io.BytesIO(data)))))


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (37, 53), (896, 896), (895, 897), (1920, 1080),
                                  (1, 500), (3000, 2), (4000, 25)], ids=str)
def test_edge_sizes_from_arrays(size, real_images, gemma, ref):
    w, h = size
    arr = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BICUBIC))
    # tiny arrays are ambiguous (3 rows could be channels): say which, to both
    check(gemma(arr, input_data_format="channels_last"),
          reference(ref, arr, input_data_format="channels_last"))


def test_grey_and_channels_first_arrays(real_images, gemma, ref):
    grey = np.asarray(real_images.open("camera"))[:, :, None].copy()
    check(gemma(grey), reference(ref, grey))
    chw = np.ascontiguousarray(real_images.rgb_array("chelsea").transpose(2, 0, 1))
    check(gemma(chw), reference(ref, chw))


def test_batch_and_torch_output(real_images, gemma, ref):
    names = ["chelsea", "rocket", "camera", "logo2", "chelsea"]
    want = reference(ref, [real_images.open(n) for n in names])
    check(gemma([real_images.open(n) for n in names]), want)
    out = gemma([real_images.open(n) for n in names], return_tensors="pt")
    assert np.array_equal(out["pixel_values"].numpy(), want[0])
    assert out["num_crops"].tolist() == [0] * 5 and str(out["num_crops"].dtype) == "torch.int64"
    assert out["num_tokens"].tolist() == [256] * 5


def test_tokens_without_pixels(gemma):
    """Every image is 256 tokens in the prompt (image_seq_length), whatever its size."""
    assert gemma.num_tokens(1920, 1080) == 256 and gemma.num_tokens(1, 1) == 256


def test_call_options(real_images, gemma, ref):
    """size, mean / std and the rescale flags as transformers reads them."""
    im = real_images.open("coffee")
    for kw in ({"size": {"height": 448, "width": 448}}, {"image_mean": [0.1, 0.2, 0.3]},
               {"do_normalize": False}, {"do_rescale": False, "do_normalize": False},
               {"resample": 3},
               {"pan_and_scan_min_crop_size": 256, "pan_and_scan_max_num_crops": 4,
                "pan_and_scan_min_ratio_to_activate": 1.2, "do_pan_and_scan": False}):
        check(gemma(im, **kw), reference(ref, im, **kw))


# Gemma3Processor's defaults for its image processor's pan-and-scan settings
PAS = dict(do_pan_and_scan=True, pan_and_scan_min_crop_size=256, pan_and_scan_max_num_crops=4,
           pan_and_scan_min_ratio_to_activate=1.2)
# (width, height): landscape and portrait past the ratio (2, 3, 4 crops, capped at 4, the last
# crop truncated), just below it, square, crops under the minimum size, a tall strip
PAS_SIZES = [(1500, 400), (400, 1500), (1501, 500), (900, 751), (899, 750), (640, 427),
             (512, 512), (3000, 200), (600, 290), (300, 1001), (5000, 900)]


@pytest.mark.parametrize("size", PAS_SIZES, ids=str)
def test_pan_and_scan(size, real_images, gemma, ref):
    w, h = size
    im = real_images.rgb("hubble").resize((w, h), Image.Resampling.BICUBIC)
    check(gemma(im, **PAS), reference(ref, im, **PAS))


def test_pan_and_scan_batch_modes_and_bytes(real_images, gemma, ref):
    """Several images (some with crops, some without), PIL modes, encoded bytes and bfloat16."""
    wide = real_images.rgb("coffee").resize((1400, 300))
    images = [real_images.open("rocket"), wide, real_images.mode_image("RGBA"),
              real_images.mode_image("P").resize((200, 700))]
    want = reference(ref, images, **PAS)
    assert want[1].tolist()[1] > 0
    check(gemma(images, **PAS), want)
    data = encode(wide, "PNG")
    check(gemma([data], **PAS), reference(ref, [load_image(Image.open(io.BytesIO(data)))], **PAS))
    other = dict(PAS, pan_and_scan_min_crop_size=100, pan_and_scan_max_num_crops=7,
                 pan_and_scan_min_ratio_to_activate=2.5)
    check(gemma([wide], **other), reference(ref, [wide], **other))
    out = gemma([wide], return_tensors="pt", **PAS)
    assert out["pixel_values"].shape[0] == 1 + int(out["num_crops"][0])
    assert out["num_tokens"].tolist() == [256] * (1 + int(out["num_crops"][0]))


def test_pan_and_scan_without_its_settings_and_non_square_sizes_are_refused(real_images, gemma):
    im = real_images.open("rocket")
    with pytest.raises(UnsupportedCallError, match="pan_and_scan_min_crop_size"):
        gemma(im, do_pan_and_scan=True)
    with pytest.raises(UnsupportedCallError, match="square"):
        gemma(im, size={"height": 896, "width": 448})


def test_model_folder(tmp_path, real_images, ref):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    # it names the torchvision class, which transformers' Auto classes resolve (when installed)
    assert load_processor(tmp_path).config.backend == "torchvision"
    proc = load_processor(tmp_path, backend="pil")
    assert proc.config.family == "gemma3" and proc.config.patch_size == 896
    im = real_images.open("grace_hopper")
    check(proc(im), reference(ref, real_images.open("grace_hopper")))
    # a folder asking for pan-and-scan is not served
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({**HUB_FILE,
                                                                   "do_pan_and_scan": True}))
    with pytest.raises(ValueError, match="pan_and_scan"):
        load_processor(tmp_path)


def test_dropin_equals_transformers(tmp_path, real_images, ref):
    import smg_fast.hf as hf

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    ours = hf.Gemma3ImageProcessorPil.from_pretrained(tmp_path)
    assert ours.model_input_names == ["pixel_values", "num_crops"]
    images = [real_images.open("rocket"), real_images.rgb("camera")]
    out = ours(images, return_tensors="np")
    assert set(out) == {"pixel_values", "num_crops"}
    check(out, reference(ref, images))
    # pan-and-scan, computed here (not handed to transformers), equal to it
    wide = real_images.rgb("rocket").resize((1500, 400))
    got = ours([wide], return_tensors="np", **PAS)
    check(got, reference(ref, [wide], **PAS))
    assert np.asarray(got["num_crops"]).tolist() == [4]  # round(1500 / 400)
    assert ours._reference is None  # transformers' class was never needed
    # the hub file's do_convert_rgb null keeps a grey image's one band there: both refuse it
    grey = real_images.open("camera")
    assert grey.mode == "L"
    with pytest.raises(ValueError, match="mean must have 1 elements"):
        Gemma3ImageProcessorPil.from_pretrained(tmp_path)([grey], return_tensors="np")
    with pytest.raises(ValueError, match="mean must have 1 elements"):
        ours([grey], return_tensors="np")


def test_dropin_without_return_tensors_gives_lists_as_transformers(tmp_path, real_images):
    """No return_tensors: one array per image or crop and int counts, as transformers' class."""
    import smg_fast.hf as hf

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    ours = hf.Gemma3ImageProcessorPil.from_pretrained(tmp_path)
    theirs = Gemma3ImageProcessorPil.from_pretrained(tmp_path)
    images = [real_images.rgb("rocket").resize((1500, 400)), real_images.rgb("camera")]
    for call in ({}, PAS):
        got, want = ours(images, **call), theirs(images, **call)
        assert type(got["pixel_values"]) is type(want["pixel_values"]) is list
        assert got["num_crops"] == want["num_crops"]
        assert all(type(n) is int for n in got["num_crops"])
        assert len(got["pixel_values"]) == len(want["pixel_values"])
        for a, b in zip(got["pixel_values"], want["pixel_values"], strict=True):
            assert type(a) is type(b) and np.array_equal(a, b)


def test_dropin_keeps_constructor_pan_and_scan_settings(tmp_path, real_images):
    """Pan-and-scan given to from_pretrained (as vLLM gives a request's) applies to each call."""
    import smg_fast.hf as hf

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(HUB_FILE))
    ours = hf.Gemma3ImageProcessorPil.from_pretrained(tmp_path, **PAS)
    theirs = Gemma3ImageProcessorPil.from_pretrained(tmp_path, **PAS)
    assert isinstance(ours, hf.Gemma3ImageProcessorPil) and ours.do_pan_and_scan is True
    assert ours.to_dict()["pan_and_scan_min_crop_size"] == 256
    wide = real_images.rgb("rocket").resize((1500, 400))
    for call in ({}, {"do_pan_and_scan": False}):
        check(ours([wide], return_tensors="np", **call), reference(theirs, [wide], **call))
    assert ours._reference is None
    # without its settings, as transformers' class, it cannot run
    ours = hf.Gemma3ImageProcessorPil.from_pretrained(tmp_path, do_pan_and_scan=True)
    theirs = Gemma3ImageProcessorPil.from_pretrained(tmp_path, do_pan_and_scan=True)
    for proc in (ours, theirs):
        with pytest.raises(TypeError):
            proc([wide], return_tensors="np")


def test_folder_without_model_type_and_class_defaults(tmp_path, real_images):
    """Known by its image_processor_type alone; what it lacks takes the class's defaults (224)."""
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Gemma3ImageProcessorPil"}))
    proc = load_processor(tmp_path)
    assert (proc.config.family, proc.config.backend, proc.config.patch_size) == ("gemma3", "pil",
                                                                                 224)
    theirs = Gemma3ImageProcessorPil.from_pretrained(tmp_path)
    im = real_images.open("coffee")
    check(proc(im), reference(theirs, im))


def test_size_as_an_int_is_a_square_and_other_types_refuse(tmp_path, real_images, ref):
    """transformers reads size=n as n x n; smg-fast does too, and refuses what it cannot read."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    import smg_fast.hf as hf

    im = real_images.open("grace_hopper")
    want = Gemma3ImageProcessorPil(**{**HUB_FILE, "size": 448})(im, return_tensors="np")
    ours = hf.Gemma3ImageProcessorPil(**{**HUB_FILE, "size": 448})(im, return_tensors="np")
    assert np.array_equal(ours["pixel_values"], want["pixel_values"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({**HUB_FILE, "size": 448}))
    assert load_processor(tmp_path, backend="pil").config.patch_size == 448
    with pytest.raises(ValueError, match="size must be"):
        hf.Gemma3ImageProcessorPil(**{**HUB_FILE, "size": [448, 448]})
