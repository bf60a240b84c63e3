"""Bit-exact parity of LLaVA-NeXT and LLaVA-OneVision with transformers' PIL classes.

LlavaNextImageProcessorPil and LlavaOnevisionImageProcessorPil configured as the published
llava-hf/llava-v1.6-mistral-7b-hf and llava-hf/llava-onevision-qwen2-7b-ov-hf
preprocessor_config.json values (smg_fast.testing.oracles' HUB_LLAVA, written out apart from
the family modules). pixel_values [N, tiles, 3, side, side] (each image's base tile, then its
best-resolution tiles, zero tiles padding the batch), image_sizes and OneVision's
batch_num_images are compared with np.array_equal on real photos, every PIL mode, encoded bytes
and paths, an EXIF-rotated JPEG, a 16-bit PNG, numpy arrays, tiny and extreme-aspect sizes,
float32, bfloat16 and float16; the size rule against transformers' own functions, the token
counts against transformers' processors; through load_processor (by name and from a model
folder) and the smg_fast.hf drop-ins."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image
from support.images import encode
from transformers.image_processing_utils import get_patch_output_size, select_best_resolution
from transformers.image_utils import load_image
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)
from transformers.models.llava_next.processing_llava_next import (
    LlavaNextProcessor as TheirNextProcessor,
)
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
    LlavaOnevisionImageProcessorPil,
)
from transformers.models.llava_onevision.processing_llava_onevision import (
    LlavaOnevisionProcessor as TheirOnevisionProcessor,
)

from smg_fast import expand, load_processor
from smg_fast.errors import CompactFormatError, UnsupportedCallError
from smg_fast.processors.tiles import best_resolution, fit_inside
from smg_fast.testing.model_folders_llava import make_llava_tiles_folder
from smg_fast.testing.oracles import HUB_LLAVA, hf_llava

FAMILIES = ("llava_next", "llava_onevision")
PIL_CLASSES = {"llava_next": LlavaNextImageProcessorPil,
               "llava_onevision": LlavaOnevisionImageProcessorPil}
TYPES = {"llava_next": "LlavaNextImageProcessor",
         "llava_onevision": "LlavaOnevisionImageProcessor"}
SIDES = {"llava_next": 336, "llava_onevision": 384}
SIZES = [(1, 1), (2, 3), (15, 17), (37, 53), (336, 336), (337, 335), (672, 336), (1920, 1080),
         (1080, 1920), (4000, 3000), (3000, 7), (1, 500), (4000, 25), (25, 4000), (2305, 1)]


@pytest.fixture(params=FAMILIES, scope="module")
def family(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def ref(family):
    return hf_llava(family, PIL_CLASSES[family])


@pytest.fixture(scope="module")
def llava(family):
    return load_processor(family)


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


def test_builtin_is_the_hub_config(family, llava):
    cfg, hub = llava.config, HUB_LLAVA[family]
    assert (cfg.patch_size, cfg.resample, cfg.backend) == (SIDES[family], 3, "pil")
    assert [list(p) for p in cfg.image_grid_pinpoints] == hub["image_grid_pinpoints"]
    assert list(cfg.image_mean) == hub["image_mean"] and list(cfg.image_std) == hub["image_std"]
    assert cfg.rescale_factor == hub["rescale_factor"]


@pytest.mark.parametrize("size", SIZES + [(500, 1), (7, 3000), (1008, 336), (1000, 999)],
                         ids=str)
def test_size_rule_is_transformers(family, size):
    """The chosen canvas and the fitted size, against transformers' own functions."""
    w, h = size
    pins = [tuple(p) for p in HUB_LLAVA[family]["image_grid_pinpoints"]]
    want = select_best_resolution((h, w), pins)
    assert best_resolution(w, h, pins) == tuple(want)
    fitted = get_patch_output_size(np.zeros((3, h, w), np.uint8), want, "channels_first")
    assert fit_inside(w, h, want[1], want[0]) == tuple(fitted)[::-1]


def test_real_image(family, real_image_name, real_images, llava, ref):
    check(llava(real_images.open(real_image_name)),
          reference(ref, real_images.open(real_image_name)))


def test_pil_mode(family, mode_kind, real_images, llava, ref):
    want = reference(ref, real_images.mode_image(mode_kind))
    check(llava(real_images.mode_image(mode_kind)), want)


@pytest.mark.parametrize("name", ["rocket", "coffee", "logo2"])
def test_bytes_and_path_input(family, name, real_images, llava, ref):
    """Bytes and paths load as transformers' load_image does."""
    want = reference(ref, load_image(str(real_images.path(name))))
    for src in (real_images.bytes(name), str(real_images.path(name)), real_images.path(name)):
        check(llava(src), want)


def test_encoded_jpeg_1080p(family, real_images, llava, ref, overlapped):
    """A 1920x1080 JPEG's bytes: alone decoded inside the native call, in a batch first."""
    data = encode(real_images.rgb("astronaut").resize((1920, 1080)), "JPEG")
    want = reference(ref, load_image(Image.open(io.BytesIO(data))))
    for dtype, name in ((np.float32, "float32"), (np.uint16, "bfloat16")):
        check(llava(data, dtype=name), want, dtype)
    assert overlapped == [True, True]
    small = real_images.bytes("rocket")
    check(llava([data, small]), reference(ref, [load_image(Image.open(io.BytesIO(data))),
                                                load_image(str(real_images.path("rocket")))]))


def test_exif_rotated_jpeg(family, exif_rotated_jpeg, llava, ref):
    want = reference(ref, load_image(str(exif_rotated_jpeg)))
    check(llava(str(exif_rotated_jpeg)), want)
    check(llava(exif_rotated_jpeg.read_bytes()), want)


def test_16_bit_png(family, real_images, llava, ref):
    data = encode(real_images.mode_image("I;16"), "PNG")
    check(llava(data), reference(ref, load_image(Image.open(io.BytesIO(data)))))


@pytest.mark.parametrize("size", SIZES, ids=str)
def test_edge_sizes_from_arrays(family, size, real_images, llava, ref):
    w, h = size
    arr = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BICUBIC))
    check(llava(arr, input_data_format="channels_last"),
          reference(ref, arr, input_data_format="channels_last"))


@pytest.mark.parametrize("one_block", [False, True])
def test_pil_image_over_pillow_block_size(one_block, family, real_images, llava, ref,
                                          pillow_allocator):
    """An image over Pillow's block size (16 MiB): in several blocks, or in one (read in place)."""
    pillow_allocator(one_block)
    big = real_images.rgb("astronaut").resize((2600, 1800), Image.Resampling.BICUBIC)
    assert getattr(big.im, "isblock", lambda: False)() == one_block
    check(llava(big), reference(ref, big))


def test_grey_rgba_and_channels_first_arrays(family, real_images, llava, ref):
    grey = np.asarray(real_images.open("camera"))[:, :, None].copy()
    check(llava(grey), reference(ref, grey))
    rgba = np.asarray(real_images.mode_image("RGBA")).copy()
    check(llava(rgba), reference(ref, rgba))
    chw = np.ascontiguousarray(real_images.rgb_array("chelsea").transpose(2, 0, 1))
    check(llava(chw), reference(ref, chw))


def test_float_images(family, real_images, llava, ref):
    """Float arrays in [0, 1] with do_rescale=False, as transformers reads them."""
    arr = real_images.rgb_array("chelsea").astype(np.float32) / 255
    check(llava(arr, do_rescale=False), reference(ref, arr, do_rescale=False))


def test_batch_pads_tiles_with_zeros(family, real_images, llava, ref):
    """Images with different tile counts: zero tiles after each image's own."""
    images = [real_images.open("chelsea"), real_images.rgb("rocket").resize((37, 900)),
              real_images.mode_image("RGBA"), real_images.rgb("coffee").resize((1500, 40))]
    want = reference(ref, images)
    counts = [llava.plan(im.width, im.height).rows for im in images]
    assert len(set(counts)) > 1 and not want[0][counts.index(min(counts)), min(counts):].any()
    check(llava(images), want)
    for dtype, name in ((np.uint16, "bfloat16"), (np.float16, "float16")):
        check(llava(images, dtype=name), want, dtype)
    mixed = [real_images.rgb_array("chelsea").astype(np.float32) / 255,
             real_images.rgb("rocket").resize((37, 900))]
    check(llava(mixed, do_rescale=False), reference(ref, mixed, do_rescale=False))


def their_tokens(family: str, ref, height: int, width: int) -> int:
    """transformers' processor's placeholder count, as the published processor configs set it."""
    if family == "llava_next":  # patch 14, one CLS token, the default feature strategy
        proc = TheirNextProcessor.__new__(TheirNextProcessor)
        proc.image_processor, proc.patch_size = ref, 14
        proc.num_additional_image_tokens = 1
        return proc._get_number_of_features(height, width, 336, 336) - 1
    proc = TheirOnevisionProcessor.__new__(TheirOnevisionProcessor)
    proc.image_processor, proc.num_image_tokens = ref, 729  # feature strategy "full"
    proc.vision_aspect_ratio = "anyres_max_9"
    return proc._get_number_of_features(height, width, 384, 384)


def test_torch_output_and_tokens(family, real_images, llava, ref):
    images = [real_images.open("chelsea"), real_images.open("camera")]
    want = reference(ref, images)
    out = llava(images, return_tensors="pt")
    assert np.array_equal(out["pixel_values"].numpy(), want[0])
    assert out["image_sizes"].tolist() == want[1].tolist()
    assert str(out["image_sizes"].dtype) == "torch.int64"
    assert out["num_tokens"].tolist() == [their_tokens(family, ref, h, w) for h, w in want[1]]
    for w, h in SIZES:
        assert llava.num_tokens(w, h) == their_tokens(family, ref, h, w), (w, h)


def test_call_options(family, real_images, llava, ref):
    """Pinpoints, the tile size, mean / std and the flags as transformers reads them."""
    im = real_images.open("coffee")
    side = SIDES[family]
    square = {"height": side // 2, "width": side // 2}
    tile = {"shortest_edge": side // 2} if family == "llava_next" else square
    crop = {"crop_size": square} if family == "llava_next" else {}
    for kw in ({"image_grid_pinpoints": [[side, side], [side, 3 * side], [2 * side, side]]},
               {"size": tile, **crop, "image_grid_pinpoints": [[side, side]]},
               {"image_mean": [0.1, 0.2, 0.3]}, {"do_normalize": False},
               {"do_rescale": False, "do_normalize": False}, {"resample": 2},
               {"do_pad": True}):
        check(llava(im, **kw), reference(ref, im, **kw))
    with pytest.raises(UnsupportedCallError, match="do_pad"):
        llava(im, do_pad=False)
    with pytest.raises(UnsupportedCallError, match="whole"):  # 336 is not whole 200-pixel tiles
        llava(im, size={"height": 200, "width": 200}, crop_size={"height": 200, "width": 200})
    if family == "llava_next":
        with pytest.raises(UnsupportedCallError, match="one side"):
            llava(im, size={"shortest_edge": 448})


def test_compact_format_where_zero_padding_is_a_table_value(family, real_images, llava):
    """The batch's zero tiles are carried where pixel 0 normalizes to +0.0, refused otherwise."""
    images = [real_images.open("rocket"), real_images.rgb("coffee").resize((1500, 40))]
    with pytest.raises(CompactFormatError, match="pads with zero rows"):
        llava(images, encoding="uint8+lut")
    zero_mean = load_processor(family, image_mean=[0.0] * 3)
    for rt in ("np", "pt"):
        full = np.asarray(zero_mean(images, return_tensors=rt)["pixel_values"])
        compact = zero_mean(images, encoding="uint8+lut", return_tensors=rt)["pixel_values"]
        assert compact.shape == full.shape and np.array_equal(np.asarray(expand(compact)), full)


def test_onevision_samples(real_images, exif_rotated_jpeg):
    """batch_num_images per sample; a sample of several images: each a mean-colour square."""
    proc = load_processor("llava_onevision")
    ref = hf_llava("llava_onevision", LlavaOnevisionImageProcessorPil)
    a, b = real_images.open("chelsea"), real_images.open("rocket")
    got, want = proc([[a], [b]]), ref([[a], [b]], return_tensors="np")
    assert np.array_equal(got["pixel_values"], want["pixel_values"])
    assert got["batch_num_images"].tolist() == list(want["batch_num_images"]) == [1, 1]
    assert got["batch_num_images"].dtype == np.int64
    assert proc([a, b])["batch_num_images"].tolist() == [1, 1]
    data = encode(real_images.mode_image("I;16"), "PNG")
    wide = real_images.rgb("coffee").resize((1500, 40))
    samples = [[a], [real_images.mode_image("RGBA"), real_images.open("camera"), wide],
               [], [load_image(Image.open(io.BytesIO(data))), load_image(str(exif_rotated_jpeg))],
               [b]]
    want = ref(samples, return_tensors="np")
    ours = [[a], [real_images.mode_image("RGBA"), real_images.open("camera"), wide], [],
            [data, exif_rotated_jpeg.read_bytes()], [b]]
    got = proc(ours)
    check(got, (np.asarray(want["pixel_values"]), np.asarray(want["image_sizes"])))
    assert got["batch_num_images"].tolist() == list(want["batch_num_images"]) == [1, 3, 2, 1]
    squares = [i for i, n in enumerate([1, 3, 3, 3, 2, 2, 1]) if n > 1]
    assert (got["num_tokens"][squares] == 730).all()  # 729 features and the newline
    for dtype, name in ((np.uint16, "bfloat16"), (np.float16, "float16")):
        check(proc(ours, dtype=name),
              (np.asarray(want["pixel_values"]), np.asarray(want["image_sizes"])), dtype)
    pt = proc(ours, return_tensors="pt")
    assert np.array_equal(pt["pixel_values"].numpy(), want["pixel_values"])
    assert pt["batch_num_images"].tolist() == [1, 3, 2, 1]
    with pytest.raises(UnsupportedCallError, match="image_mean"):
        proc([[a, b]], image_mean=[0.1, 0.2, 0.3])
    with pytest.raises(UnsupportedCallError, match="encoding"):
        proc([[a, b]], encoding="uint8+lut")


def test_model_folder(family, tmp_path, real_images, ref):
    make_llava_tiles_folder(tmp_path, family)
    # it names the torchvision class, which transformers' Auto classes resolve (when installed)
    assert load_processor(tmp_path).config.backend == "torchvision"
    proc = load_processor(tmp_path, backend="pil")
    assert proc.config.family == family and proc.config.patch_size == SIDES[family]
    im = real_images.open("grace_hopper")
    check(proc(im), reference(ref, im))


def test_dropin_equals_transformers(family, tmp_path, real_images):
    import smg_fast.hf as hf

    make_llava_tiles_folder(tmp_path, family, image_processor_type=TYPES[family] + "Pil")
    ours = getattr(hf, TYPES[family] + "Pil").from_pretrained(tmp_path)
    theirs = PIL_CLASSES[family].from_pretrained(tmp_path)
    assert ours.model_input_names == theirs.model_input_names
    images = [real_images.open("rocket"), real_images.open("camera")]
    for rt in ("np", "pt"):
        got, want = ours(images, return_tensors=rt), theirs(images, return_tensors=rt)
        assert set(got) == set(want)
        assert type(got["pixel_values"]) is type(want["pixel_values"])
        for key in want:
            assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key
    got, want = ours(images), theirs(images)  # no return_tensors: lists, as transformers's
    assert set(got) == set(want)
    assert type(got["pixel_values"]) is type(want["pixel_values"])
    assert np.array_equal(np.asarray(got["pixel_values"]), np.asarray(want["pixel_values"]))
    assert [tuple(s) for s in got["image_sizes"]] == [tuple(s) for s in want["image_sizes"]]
    assert ours._reference is None  # transformers' class was never needed
    if family == "llava_onevision":  # several images in a sample, and a call's mean
        got, want = ours([images], return_tensors="np"), theirs([images], return_tensors="np")
        assert np.array_equal(got["pixel_values"], want["pixel_values"])
        assert ours._reference is None
        kw = dict(return_tensors="np", image_mean=[0.2, 0.3, 0.4])
        got, want = ours([images], **kw), theirs([images], **kw)  # transformers computes it
        assert np.array_equal(got["pixel_values"], want["pixel_values"])
        assert ours._reference is not None


def test_dropin_computes_the_do_pad_true_that_llava_next_processor_passes(tmp_path,
                                                                          real_images):
    """LlavaNextProcessor calls its image processor with do_pad=True: smg-fast computes it.

    do_pad=False (transformers' unpadded list) goes to transformers' class, equal as well."""
    import smg_fast.hf as hf

    make_llava_tiles_folder(tmp_path, "llava_next",
                            image_processor_type="LlavaNextImageProcessorPil")
    ours = hf.LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    theirs = LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    images = [real_images.open("rocket"), real_images.open("camera")]
    got = ours(images, return_tensors="np", do_pad=True)
    want = theirs(images, return_tensors="np", do_pad=True)
    assert np.array_equal(got["pixel_values"], want["pixel_values"])
    assert np.array_equal(got["image_sizes"], want["image_sizes"])
    assert ours._reference is None
    got, want = ours(images, do_pad=False), theirs(images, do_pad=False)
    assert len(got["pixel_values"]) == len(want["pixel_values"]) == 2
    for a, b in zip(got["pixel_values"], want["pixel_values"], strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert ours._reference is not None


def test_folder_without_model_type_is_told_by_its_class(family, tmp_path, real_images, ref):
    """No config.json: the preprocessor class names the family (the PIL class: the pil backend)."""
    make_llava_tiles_folder(tmp_path, family, image_processor_type=TYPES[family] + "Pil")
    (tmp_path / "config.json").unlink()
    proc = load_processor(tmp_path)
    assert (proc.config.family, proc.config.backend) == (family, "pil")
    im = real_images.open("coffee")
    check(proc(im), reference(ref, im))


@pytest.mark.parametrize("bad,match", [
    ({"image_grid_pinpoints": [[336 * 40, 336 * 40]]}, "at most 1024 tiles"),
    ({"image_grid_pinpoints": [[0, 336]]}, "positive"),
    ({"image_grid_pinpoints": "336x672"}, "height, width"),
    ({"size": {"height": 336, "width": 300}}, "square"),
    ({"do_pad": False}, "do_pad"),
])
def test_config_values_not_computed_are_refused(tmp_path, bad, match):
    """A folder smg-fast does not reproduce: ValueError naming the value, before any image."""
    make_llava_tiles_folder(tmp_path, "llava_next", **bad)
    with pytest.raises(ValueError, match=match):
        load_processor(tmp_path)


def test_next_size_and_crop_must_name_one_tile(tmp_path):
    make_llava_tiles_folder(tmp_path, "llava_next", size={"shortest_edge": 448})
    with pytest.raises(ValueError, match="one side"):
        load_processor(tmp_path)


def test_onevision_square_is_bounded_before_it_is_allocated(real_images):
    """A multi-image sample's square passing max_image_pixels: a typed error, nothing allocated."""
    from smg_fast.errors import InvalidImageError

    proc = load_processor("llava_onevision", max_image_pixels=1_000_000)
    thin = np.zeros((10, 2000, 3), np.uint8)  # 20000 pixels, a 2000x2000 square
    assert proc([thin])["pixel_values"].shape[0] == 1  # alone: tiled, no square
    with pytest.raises(InvalidImageError, match="square"):
        proc([[thin, real_images.open("rocket")]])


def test_call_variants_are_kept(real_images, llava):
    """A call's pinpoints build one processor, reused by the next such call."""
    pins = [[SIDES[llava.config.family]] * 2]
    im = real_images.open("rocket")
    assert llava._for_call({"image_grid_pinpoints": pins}) is \
        llava._for_call({"image_grid_pinpoints": pins})
    assert llava(im, image_grid_pinpoints=pins)["pixel_values"].shape[1] == 2


def test_a_folder_with_a_zero_tile_is_refused_as_transformers_refuses_it(family, tmp_path):
    """A size / crop_size of 0 is not the class default's tile: transformers' class fails on it."""
    zero = ({"size": {"shortest_edge": 0}, "crop_size": {"height": 0, "width": 0}}
            if family == "llava_next" else {"size": {"height": 0, "width": 0}})
    pins = [[448, 448]]  # whole tiles of the 224-pixel class default too
    with pytest.raises(Exception):  # noqa: B017 - transformers' own failure, whatever its kind
        hf_llava(family, PIL_CLASSES[family], image_grid_pinpoints=pins, **zero)(
            Image.new("RGB", (500, 300)), return_tensors="np")
    folder = make_llava_tiles_folder(tmp_path, family, image_grid_pinpoints=pins, **zero)
    with pytest.raises(ValueError, match="patch_size"):
        load_processor(str(folder))


def test_a_llava_next_tile_under_the_vision_patch_is_refused_at_load(tmp_path):
    """LlavaNextProcessor counts a tile's features as tile // 14 a side: 0 divides by zero."""
    one = {"size": {"shortest_edge": 7}, "crop_size": {"height": 7, "width": 7}}
    folder = make_llava_tiles_folder(tmp_path, "llava_next", image_grid_pinpoints=[[7, 14]], **one)
    with pytest.raises(ValueError, match="14"):
        load_processor(str(folder))


@pytest.mark.parametrize("kind", [lambda v: v + 0.5, float, str, np.int64],
                         ids=["half", "float", "str", "np.int64"])
def test_a_call_s_pinpoints_that_are_not_ints_are_refused(family, ref, llava, kind):
    """transformers' call kwargs are strict (int pairs): it refuses them, never truncates."""
    side = SIDES[family]
    pins = [[side, kind(2 * side)]]
    image = Image.new("RGB", (50, 30))
    with pytest.raises(Exception, match="image_grid_pinpoints"):
        ref(image, return_tensors="np", image_grid_pinpoints=pins)
    with pytest.raises(UnsupportedCallError, match="image_grid_pinpoints"):
        llava(image, image_grid_pinpoints=pins)
