"""Bit-exact parity of Idefics3 / SmolVLM with transformers' Idefics3ImageProcessorPil / SmolVLM's.

The published preprocessor_config.json values (smg_fast.testing.model_folders_idefics3, written
out apart from the family module): Idefics3-8B (longest edge 1456, tiles 364), SmolVLM-Instruct
(1536 / 384, model_type idefics3) and SmolVLM2 (2048 / 512, model_type smolvlm); LANCZOS, mean /
std 0.5. pixel_values [samples, frames, 3, t, t], pixel_attention_mask (int64) and rows / cols
are compared with np.array_equal / == on real photos, every PIL mode, encoded bytes and paths,
an EXIF-rotated JPEG, a 16-bit PNG, numpy arrays, tiny and extreme-aspect sizes, nested batches
padded with zero frames, float32 / bfloat16 / float16; through load_processor (by name and from
model folders) and the smg_fast.hf drop-ins."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image
from support.images import encode
from support.input_cases import array_cases, encoded_cases
from transformers.image_utils import load_image
from transformers.models.idefics3 import image_processing_pil_idefics3 as hf_idefics3
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil

from smg_fast import load_processor
from smg_fast.errors import CompactFormatError, UnsupportedCallError
from smg_fast.processors.families.idefics3_sizes import longest_edge_size, tile_multiple_size
from smg_fast.testing.model_folders_idefics3 import (
    IDEFICS3,
    SMOLVLM2,
    SMOLVLM_INSTRUCT,
    hub_kwargs,
    make_idefics3_folder,
)


@pytest.fixture(scope="module")
def ref():
    return Idefics3ImageProcessorPil(**hub_kwargs(IDEFICS3))


@pytest.fixture(scope="module")
def idefics3():
    return load_processor("idefics3")


def reference(ref, images, **kw):
    out = ref(images, return_tensors="np", return_row_col_info=True, **kw)
    return {k: out[k] for k in ("pixel_values", "pixel_attention_mask", "rows", "cols")}


def check(out, want, dtype=np.float32) -> None:
    pv = want["pixel_values"]
    got = np.asarray(out["pixel_values"])
    assert got.dtype == dtype and got.shape == pv.shape, (got.shape, pv.shape)
    if dtype != np.float32:
        pv = torch.from_numpy(pv).to({np.uint16: torch.bfloat16,
                                      np.float16: torch.float16}[dtype])
        pv = pv.view(torch.uint16).numpy() if dtype == np.uint16 else pv.numpy()
    bad = got != pv
    assert not bad.any(), f"{bad.mean():.4%} of values differ"
    mask = np.asarray(out["pixel_attention_mask"])
    assert mask.dtype == np.int64 and np.array_equal(mask, want["pixel_attention_mask"])
    assert (out["rows"], out["cols"]) == (want["rows"], want["cols"])


def ours(proc, images, **kw):
    return proc(images, return_row_col_info=True, **kw)


def test_builtin_configs_are_the_hub_configs():
    for name, hub in (("idefics3", IDEFICS3), ("smolvlm", SMOLVLM2)):
        cfg = load_processor(name).config
        pre = hub_kwargs(hub)
        assert (cfg.patch_size, cfg.longest_edge) == (pre["max_image_size"]["longest_edge"],
                                                      pre["size"]["longest_edge"])
        assert (cfg.resample, cfg.crop_to_patches, cfg.backend) == (1, True, "pil")
        assert list(cfg.image_mean) == pre["image_mean"] and list(cfg.image_std) == pre["image_std"]
        assert cfg.rescale_factor == pre["rescale_factor"]


SIZES = [(1, 1), (2, 3), (37, 53), (364, 364), (365, 364), (1456, 1456), (1920, 1080),
         (1080, 1920), (4000, 3000), (3000, 7), (1, 500), (4000, 25), (5000, 1), (13, 1100),
         (727, 729)]


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("longest,tile", [(1456, 364), (2048, 512), (1536, 384), (8192, 364)])
def test_size_rules_are_transformers(size, longest, tile):
    w, h = size
    want = hf_idefics3.get_resize_output_image_size(np.zeros((3, h, w), np.uint8), longest)
    assert longest_edge_size(h, w, longest) == tuple(want)
    h1, w1 = want
    small = np.zeros((1, min(h1, 64), min(w1, 64)), np.uint8)  # shape read, then resized
    seen = {}

    def spy(image, size, **kw):
        seen["size"] = (size.height, size.width)
        return small

    theirs = Idefics3ImageProcessorPil()
    theirs.resize = spy  # the second resize's size, without resizing
    theirs.resize_for_vision_encoder(np.zeros((3, h1, w1), np.uint8), tile)
    assert tile_multiple_size(h1, w1, tile) == seen["size"]


def test_real_image(real_image_name, real_images, idefics3, ref):
    check(ours(idefics3, real_images.open(real_image_name)),
          reference(ref, real_images.open(real_image_name)))


def test_pil_mode(mode_kind, real_images, idefics3, ref):
    check(ours(idefics3, real_images.mode_image(mode_kind)),
          reference(ref, real_images.mode_image(mode_kind)))


@pytest.mark.parametrize("one_block", [False, True])
def test_pil_image_over_pillow_block_size(one_block, real_images, idefics3, ref, pillow_allocator):
    """An image over Pillow's block size (16 MiB): in several blocks, or in one (read in place)."""
    pillow_allocator(one_block)
    big = real_images.rgb("astronaut").resize((2600, 1800), Image.Resampling.BICUBIC)
    assert getattr(big.im, "isblock", lambda: False)() == one_block
    check(ours(idefics3, big), reference(ref, big))


def test_encoded_inputs(real_images, exif_rotated_jpeg, idefics3, ref):
    """Bytes, paths, an EXIF-rotated JPEG and a 16-bit PNG, as load_image reads them."""
    for label, src, theirs in encoded_cases(real_images, exif_rotated_jpeg):
        try:
            check(ours(idefics3, src), reference(ref, theirs))
        except AssertionError as exc:
            raise AssertionError(label) from exc


def test_encoded_jpeg_4000x3000(real_images, idefics3, ref):
    """A 4000x3000 JPEG's bytes: 1456x1092, then 1456x1092, 3x4 tiles and the global image."""
    data = encode(real_images.rgb("astronaut").resize((4000, 3000)), "JPEG")
    want = reference(ref, load_image(Image.open(io.BytesIO(data))))
    assert (want["rows"], want["cols"]) == ([[3]], [[4]])
    for dtype, name in ((np.float32, "float32"), (np.uint16, "bfloat16"),
                        (np.float16, "float16")):
        check(ours(idefics3, data, dtype=name), want, dtype)


def test_arrays(real_images, idefics3, ref):
    """Tiny, extreme-aspect, grey (H, W, 1) and channels-first arrays."""
    sizes = [(1, 1), (2, 3), (37, 53), (1, 500), (3000, 3), (4000, 25), (5000, 1), (365, 364)]
    for label, arr, kw in array_cases(real_images, sizes):
        try:
            check(ours(idefics3, arr, **kw), reference(ref, arr, **kw))
        except AssertionError as exc:
            raise AssertionError(label) from exc


def test_float_images(real_images, idefics3, ref):
    """Float arrays in [0, 1] with do_rescale=False, as transformers reads them."""
    arr = real_images.rgb_array("chelsea").astype(np.float32) / 255
    check(ours(idefics3, arr, do_rescale=False), reference(ref, arr, do_rescale=False))


def test_nested_batch_pads_with_zero_frames(real_images, idefics3, ref):
    """One sample per inner list; the samples' frames padded to the longest with zero frames."""
    a, b = real_images.open("chelsea"), real_images.rgb("rocket").resize((37, 900))
    c = real_images.mode_image("RGBA")
    for images in ([[a], [b, c]], [[b], [a]], [[a, b, c]], [a, b, c], a):
        want = reference(ref, images)
        check(ours(idefics3, images), want)
    want = reference(ref, [[b], [a, c]])
    assert not want["pixel_values"][0, 5:].any() and not want["pixel_attention_mask"][0, 5:].any()
    for dtype, name in ((np.uint16, "bfloat16"), (np.float16, "float16")):
        check(ours(idefics3, [[b], [a, c]], dtype=name), want, dtype)
    mixed = [[real_images.rgb_array("chelsea").astype(np.float32) / 255],
             [real_images.rgb("rocket").resize((37, 900))]]
    check(ours(idefics3, mixed, do_rescale=False), reference(ref, mixed, do_rescale=False))


def test_torch_output_and_tokens(real_images, idefics3, ref):
    images = [[real_images.open("chelsea")], [real_images.open("camera")]]
    want = reference(ref, images)
    out = idefics3(images, return_tensors="pt")
    assert np.array_equal(out["pixel_values"].numpy(), want["pixel_values"])
    assert np.array_equal(out["pixel_attention_mask"].numpy(), want["pixel_attention_mask"])
    assert str(out["pixel_attention_mask"].dtype) == "torch.int64"
    assert "rows" not in out  # only with return_row_col_info, as transformers
    # image_seq_len (169) <image> tokens per frame: chelsea 3x4 tiles + global, camera 4x4 + 1
    assert out["num_tokens"].tolist() == [13 * 169, 17 * 169]
    assert idefics3.num_tokens(1920, 1080) == 13 * 169 and idefics3.num_tokens(10, 10) == 17 * 169


def test_call_options(real_images, idefics3, ref):
    """size, max_image_size, do_image_splitting, mean / std and the rescale flags."""
    im = real_images.open("coffee")
    for kw in ({"size": {"longest_edge": 700}}, {"max_image_size": {"longest_edge": 512},
                                                 "size": {"longest_edge": 1024}},
               {"do_image_splitting": False}, {"image_mean": [0.1, 0.2, 0.3]},
               {"do_normalize": False}, {"do_rescale": False, "do_normalize": False},
               {"do_pad": True}):
        check(ours(idefics3, im, **kw), reference(ref, im, **kw))
    with pytest.raises(UnsupportedCallError, match="do_pad"):
        idefics3(im, do_pad=False)
    with pytest.raises(UnsupportedCallError, match="longest_edge"):
        idefics3(im, size={"height": 300, "width": 200})
    with pytest.raises(UnsupportedCallError, match="tile"):
        idefics3(im, max_image_size={"longest_edge": 300})


def test_compact_format(real_images, idefics3):
    """Exact for one sample; refused for several (their padding frames are literal zeros)."""
    from smg_fast import expand

    im = real_images.open("rocket")
    got = idefics3(im, encoding="uint8+lut")["pixel_values"]
    assert np.array_equal(expand(got), idefics3(im)["pixel_values"])
    for nested in ([[im], [im, im]], [[im], [im]]):
        with pytest.raises(CompactFormatError, match="zero frames"):
            idefics3(nested, encoding="uint8+lut")
    one = idefics3([[im, im]], encoding="uint8+lut")["pixel_values"]
    assert np.array_equal(expand(one), idefics3([[im, im]])["pixel_values"])


@pytest.mark.parametrize("checkpoint,family,cls", [(IDEFICS3, "idefics3", None),
                                                   (SMOLVLM_INSTRUCT, "idefics3", None),
                                                   (SMOLVLM2, "smolvlm",
                                                    SmolVLMImageProcessorPil)])
def test_model_folders(checkpoint, family, cls, tmp_path, real_images):
    """Each checkpoint's folder: its family by model_type, as the Auto classes map it.

    The torchvision class its file names is the default; the PIL numbers equal transformers'."""
    folder = make_idefics3_folder(tmp_path, checkpoint)
    assert load_processor(folder).config.backend == "torchvision"
    proc = load_processor(folder, backend="pil")
    assert proc.config.family == family
    theirs = (cls or Idefics3ImageProcessorPil)(**hub_kwargs(checkpoint))
    images = [[real_images.open("grace_hopper")], [real_images.open("coffee"),
                                                   real_images.mode_image("LA")]]
    check(ours(proc, images), reference(theirs, images))


def test_dropins_equal_transformers(tmp_path, real_images):
    import smg_fast.hf as hf

    for checkpoint, mine, cls in ((IDEFICS3, hf.Idefics3ImageProcessorPil,
                                   Idefics3ImageProcessorPil),
                                  (SMOLVLM2, hf.SmolVLMImageProcessorPil,
                                   SmolVLMImageProcessorPil)):
        folder = make_idefics3_folder(tmp_path / checkpoint, checkpoint)
        ours_ = mine.from_pretrained(folder)
        theirs = cls.from_pretrained(folder)
        assert ours_.model_input_names == ["pixel_values", "pixel_attention_mask"]
        images = [[real_images.open("chelsea")], [real_images.open("camera"),
                                                  real_images.mode_image("RGBA")]]
        for rt in ("np", "pt", None):
            got = ours_(images, return_tensors=rt, return_row_col_info=True)
            want = theirs(images, return_tensors=rt, return_row_col_info=True)
            assert set(got) == set(want)
            for key in ("pixel_values", "pixel_attention_mask"):
                assert type(got[key]) is type(want[key]), key
                assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key
            assert (got["rows"], got["cols"]) == (want["rows"], want["cols"])
        assert set(ours_(images)) == {"pixel_values", "pixel_attention_mask"}
        for h, w in ((1080, 1920), (10, 10), (3000, 7), (364, 365), (512, 513)):
            for kw in ({}, {"do_image_splitting": False}, {"size": {"longest_edge": 700}}):
                assert ours_.get_number_of_image_patches(h, w, kw) == \
                    theirs.get_number_of_image_patches(h, w, kw), (h, w, kw)
        # a call smg-fast does not compute goes to transformers' class
        got = ours_(images[0], return_tensors="np", do_pad=False)
        want = theirs(images[0], return_tensors="np", do_pad=False)
        assert np.array_equal(np.asarray(got["pixel_values"]), np.asarray(want["pixel_values"]))


def test_idefics3_processor_with_the_dropin_equals_transformers(tmp_path, real_images):
    """transformers' Idefics3Processor with the drop-in as its image processor: the same outputs.

    Its input_ids expand each image by the rows / cols it reads (tiny tokenizer trained here)."""
    from transformers import PreTrainedTokenizerFast
    from transformers.models.idefics3.processing_idefics3 import Idefics3Processor

    import smg_fast.hf as hf
    from smg_fast.testing.model_folders import _write_tokenizer

    special = ("<|endoftext|>", "<end_of_utterance>", "<fake_token_around_image>", "<image>",
               "<global-img>", *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)))
    _write_tokenizer(tmp_path, special=special, eos="<end_of_utterance>")
    tok = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    folder = make_idefics3_folder(tmp_path / "model")
    images = [real_images.open("astronaut"), real_images.open("chelsea"),
              real_images.rgb("rocket").resize((20, 3000))]
    text = ["<image> what is this?", "<image><image> and these?"]
    outs = [Idefics3Processor(image_processor=ip, tokenizer=tok, image_seq_len=169)(
        images=images, text=text, return_tensors="np", padding=True)
        for ip in (Idefics3ImageProcessorPil.from_pretrained(folder),
                   hf.Idefics3ImageProcessorPil.from_pretrained(folder))]
    assert set(outs[0]) == set(outs[1])
    for key in outs[0]:
        assert np.array_equal(np.asarray(outs[0][key]), np.asarray(outs[1][key])), key
    assert outs[1]["pixel_values"].shape == (2, 18, 3, 364, 364)


@pytest.mark.parametrize("cls,family", [("Idefics3ImageProcessorPil", "idefics3"),
                                        ("SmolVLMImageProcessor", "smolvlm")])
def test_folder_without_model_type(cls, family, tmp_path, real_images):
    """The class a preprocessor_config.json names tells the families apart (class defaults)."""
    import json

    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": cls, "max_image_size": {"longest_edge": 512}}))
    cfg = load_processor(tmp_path).config
    assert (cfg.family, cfg.backend) == (family, "pil" if cls.endswith("Pil") else "torchvision")
    # what the file lacks takes transformers' class defaults: longest edge 4 * 364, LANCZOS
    assert (cfg.patch_size, cfg.longest_edge, cfg.resample) == (512, 1456, 1)
    theirs = {"idefics3": Idefics3ImageProcessorPil,
              "smolvlm": SmolVLMImageProcessorPil}[family].from_pretrained(tmp_path)
    im = real_images.open("coffee")
    check(ours(load_processor(tmp_path, backend="pil"), im), reference(theirs, im))
