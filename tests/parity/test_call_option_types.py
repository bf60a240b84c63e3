"""Call options of a type transformers refuses are refused, never converted.

transformers 5.24's classes check each call's options against their TypedDict: an int option
given as a float, a non-integral float, a str, a bool or a NumPy scalar (a flag given as an int,
a str or numpy.bool_; a size value the same) raises huggingface_hub's
StrictDataclassFieldValidationError. smg-fast raises UnsupportedCallError for every such case, and
computes transformers' output for the int. The PIL classes run here, the torchvision classes in
the oracle venv (tests/support/option_types_script.py runs both).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub.errors import StrictDataclassFieldValidationError
from PIL import Image as PILImage
from support.option_types_script import run
from support.tv_oracle import run_with_smg_fast

import smg_fast
from smg_fast import hf
from smg_fast.errors import UnsupportedCallError
from smg_fast.hf import (
    Idefics3ImageProcessorPil,
    LlavaNextImageProcessorPil,
    Qwen2VLImageProcessorPil,
)

SCRIPT = Path(__file__).parents[1] / "support" / "option_types_script.py"


@pytest.fixture(scope="module")
def rgb(real_images) -> np.ndarray:
    return real_images.rgb_array("chelsea")[:120, :170]


def _check(results: dict, families: set[str]) -> None:
    wrong = {k: v for k, v in results.items() if v is not True}
    assert not wrong, wrong
    assert {k.split("/")[0] for k in results} >= families
    for kind in ("int", "float", "fraction", "str", "bool", "numpy_int", "numpy_float"):
        assert f"qwen2_vl/max_pixels/{kind}" in results, kind


def test_pil_classes(rgb):
    results = run("pil", rgb)
    assert len(results) > 400
    _check(results, {"qwen2_vl", "glm4v", "hunyuan_vl", "gemma4", "internvl", "pixtral",
                     "idefics3", "llava_next", "llava_onevision", "gemma3", "gemma3n"})
    assert results["internvl/crop_to_patches/int"] is True
    assert results["internvl/crop_to_patches/numpy_bool"] is True


def test_torchvision_classes(real_images, tmp_path):
    results = run_with_smg_fast(SCRIPT, ["torchvision", str(real_images.path("chelsea"))],
                                tmp_path)
    assert len(results) > 450
    _check(results, {"qwen2_vl", "kimi_k25", "llama4", "phi4_multimodal", "internvl"})


@pytest.mark.parametrize("value", [1e6, 1000000.7, "1000000", True, np.int64(1000000)])
def test_dropin_raises_what_transformers_raises(value, rgb, hf_qwen2):
    """smg_fast.hf hands the call to transformers' class, which raises its own error."""
    with pytest.raises(StrictDataclassFieldValidationError):
        hf_qwen2(rgb, return_tensors="np", max_pixels=value)
    with pytest.raises(StrictDataclassFieldValidationError):
        Qwen2VLImageProcessorPil()(rgb, return_tensors="np", max_pixels=value)
    with pytest.raises(UnsupportedCallError, match="max_pixels must be an int"):
        smg_fast.load_processor("qwen2_vl")(rgb, max_pixels=value)


@pytest.mark.parametrize("options", [
    {"do_rescale": 0}, {"do_normalize": 1}, {"do_convert_rgb": "True"}, {"do_resize": 1},
    {"rescale_factor": 1}, {"image_mean": [0, 0, 0]}, {"size": {"shortest_edge": 3136.0,
                                                               "longest_edge": 12845056}}])
def test_shared_options_of_the_wrong_type(options, rgb, hf_qwen2):
    """The options every family reads: transformers refuses these types, and so does smg-fast."""
    with pytest.raises(StrictDataclassFieldValidationError):
        hf_qwen2(rgb, return_tensors="np", **options)
    with pytest.raises(UnsupportedCallError):
        smg_fast.load_processor("qwen2_vl")(rgb, **options)


def test_family_own_options_of_the_wrong_type(rgb):
    """Options a family's processor reads itself (Gemma 3's pan-and-scan, Idefics3's tile)."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    pas = dict(do_pan_and_scan=True, pan_and_scan_min_crop_size=256,
               pan_and_scan_max_num_crops=4, pan_and_scan_min_ratio_to_activate=1.2)
    gemma = smg_fast.load_processor("gemma3")
    for bad in ({"pan_and_scan_min_crop_size": 256.0}, {"pan_and_scan_max_num_crops": "4"},
                {"pan_and_scan_min_ratio_to_activate": 1}, {"do_pan_and_scan": 1}):
        with pytest.raises(StrictDataclassFieldValidationError):
            Gemma3ImageProcessorPil()(rgb, return_tensors="np", **{**pas, **bad})
        with pytest.raises(UnsupportedCallError):
            gemma(rgb, **{**pas, **bad})
    idefics = Idefics3ImageProcessorPil()
    for tile in (364.0, np.int64(364)):
        with pytest.raises(StrictDataclassFieldValidationError):
            idefics(rgb, return_tensors="np", max_image_size={"longest_edge": tile})
        with pytest.raises(UnsupportedCallError):
            idefics.smg_processor(rgb, max_image_size={"longest_edge": tile})


@pytest.mark.parametrize("value", [10000.7, 10000.0, np.int64(10000), np.float64(10000.5)])
def test_an_attribute_of_another_type_is_read_as_transformers_reads_it(value, rgb):
    """transformers' type rules are for call options: an attribute applies unchecked.

    transformers computes with max_pixels=10000.7 as set (its resize compares and divides by the
    float), so smg_fast.hf hands such a call to it, with the attribute set there too."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    ours, theirs = Qwen2VLImageProcessorPil(), Theirs()
    unbudgeted = len(theirs(rgb, return_tensors="np")["pixel_values"])
    ours.max_pixels = theirs.max_pixels = value
    got, ref = ours(rgb, return_tensors="np"), theirs(rgb, return_tensors="np")
    assert len(ref["pixel_values"]) < unbudgeted  # the attribute applied
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(got[key], ref[key]), key


@pytest.mark.parametrize("value", [10000.7, "10000", True])
def test_a_config_integer_of_another_kind_is_refused(value, rgb, tmp_path):
    """A constructor's or a folder's budget that is not a whole number: never truncated.

    transformers computes with 10000.7 as given (and fails on "10000" at the call): the drop-in
    constructor raises ValueError, from_pretrained hands the folder to transformers' class."""
    import json

    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    with pytest.raises(ValueError, match="max_pixels must be an integer"):
        Qwen2VLImageProcessorPil(max_pixels=value)
    with pytest.raises(ValueError, match="max_pixels must be an integer"):
        smg_fast.load_processor("qwen2_vl", max_pixels=value)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Qwen2VLImageProcessorPil", "max_pixels": value}))
    loaded = Qwen2VLImageProcessorPil.from_pretrained(tmp_path)
    assert type(loaded) is Theirs


def test_a_whole_float_budget_is_computed_as_transformers_computes_it(rgb):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    got = Qwen2VLImageProcessorPil(max_pixels=10000.0)(rgb, return_tensors="np")
    want = Theirs(max_pixels=10000.0)(rgb, return_tensors="np")
    assert len(want["pixel_values"]) < len(Theirs()(rgb, return_tensors="np")["pixel_values"])
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize("value", [3.0, 2.5, "3", np.int64(3), np.int64(0)])
def test_a_resample_not_an_int_is_refused(value, rgb):
    """transformers' PIL classes take resample unchecked and read a non-int as BILINEAR.

    int() would compute 3.0, "3" or numpy.int64(3) as bicubic: refused, and the drop-in hands
    the call (or the attribute) to transformers' class, whose output it returns."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    with pytest.raises(UnsupportedCallError, match="resample must be an int"):
        smg_fast.load_processor("qwen2_vl")(rgb, resample=value)
    want = Theirs()(rgb, return_tensors="np", resample=value)["pixel_values"]
    got = Qwen2VLImageProcessorPil()(rgb, return_tensors="np", resample=value)["pixel_values"]
    assert np.array_equal(got, want)
    theirs, ours = Theirs(), Qwen2VLImageProcessorPil()
    theirs.resample = ours.resample = value
    want = theirs(rgb, return_tensors="np")["pixel_values"]
    assert np.array_equal(ours(rgb, return_tensors="np")["pixel_values"], want)


@pytest.mark.parametrize("value", [3.0, np.int64(3)])
def test_a_config_resample_not_an_int_is_refused(value, rgb, tmp_path):
    """transformers' PIL class given resample=3.0 (a constructor's, a folder's) resizes BILINEAR.

    Never read as 3 (BICUBIC): the drop-in constructor raises ValueError, from_pretrained hands
    the folder to transformers' class, whose output it is then."""
    import json

    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    with pytest.raises(ValueError, match="resample must be an int"):
        Qwen2VLImageProcessorPil(resample=value)
    with pytest.raises(ValueError, match="resample must be an int"):
        smg_fast.load_processor("qwen2_vl", resample=value)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"image_processor_type": "Qwen2VLImageProcessorPil", "resample": float(value)}))
    loaded = Qwen2VLImageProcessorPil.from_pretrained(tmp_path)
    want = Theirs.from_pretrained(tmp_path)(rgb, return_tensors="np")["pixel_values"]
    assert np.array_equal(loaded(rgb, return_tensors="np")["pixel_values"], want)


@pytest.mark.parametrize("options", [{"crop_size": 336}, {"size": 336}, {"crop_size": [336, 336]},
                                     {"crop_size": (336, 336)}, {"size": {"shortest_edge": 336}}])
def test_llava_sizes_of_every_type_transformers_takes(options, rgb):
    """LLaVA-NeXT's size / crop_size as an int, a list, a tuple or a dict: transformers' output."""
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorPil as Theirs,
    )

    built = dict(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    want = Theirs(**built)(rgb, return_tensors="np", **options)
    got = LlavaNextImageProcessorPil(**built)(rgb, return_tensors="np", **options)
    for key in ("pixel_values", "image_sizes"):
        assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize("options", [{"crop_size": 336.0}, {"crop_size": [336.0, 336]},
                                     {"size": "336"}, {"size": np.int64(336)}])
def test_llava_sizes_of_a_type_transformers_refuses(options, rgb):
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorPil as Theirs,
    )

    with pytest.raises(StrictDataclassFieldValidationError):
        Theirs()(rgb, return_tensors="np", **options)
    with pytest.raises(UnsupportedCallError):
        smg_fast.load_processor("llava_next")(rgb, **options)


@pytest.mark.parametrize("size", [896, [896, 896], (896, 896)])
def test_a_size_that_is_not_a_dict_is_refused_and_handed_over(size, rgb):
    """A size transformers computes as an int or a list: UnsupportedCallError, handed over.

    Not a plain TypeError, so the drop-in returns transformers' output."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import (
        Gemma3ImageProcessorPil as Theirs,
    )

    with pytest.raises(UnsupportedCallError, match="size"):
        smg_fast.load_processor("gemma3")(rgb, size=size)
    want = Theirs()(rgb, return_tensors="np", size=size)["pixel_values"]
    got = smg_fast.hf.Gemma3ImageProcessorPil()(rgb, return_tensors="np", size=size)
    assert np.array_equal(got["pixel_values"], want)


_NOT_DICTS = {"zero_d": np.array(7), "int": 336, "str": "ab", "decimal": Decimal(3),
              "pair": (336, 336), "list": [336], "pairs": None, "tuple_pairs": None}


@pytest.mark.parametrize("family, key, kind", [
    (family, key, kind) for family, key in (
        ("qwen2_vl", "size"), ("llava_next", "size"), ("llava_next", "crop_size"),
        ("llava_onevision", "size"), ("idefics3", "size"), ("idefics3", "max_image_size"),
        ("pixtral", "patch_size"))
    for kind in sorted(_NOT_DICTS) if (key, kind) != ("patch_size", "int")])  # Pixtral's int
def test_a_size_option_that_is_not_a_dict(family, key, kind, rgb):
    """A size given as anything but a dict (or transformers' SizeDict): UnsupportedCallError.

    transformers refuses most such values and computes with some (an int or a pair where its
    class converts one): the drop-in then equals it, by handing the call over."""
    from smg_fast.processors.reference import reference_processor

    ours = smg_fast.load_processor(family, backend="pil")
    ref, _ = reference_processor(ours.config)
    base = {k: v for k, v in dict(vars(getattr(ref, key))).items() if v is not None} \
        if hasattr(getattr(ref, key), "__dict__") else dict(getattr(ref, key))
    value = _NOT_DICTS[kind]
    if kind.endswith("pairs"):  # dict's own constructor takes these
        value = (tuple if kind == "tuple_pairs" else list)(base.items())
    with pytest.raises(UnsupportedCallError, match=key):
        ours(rgb, **{key: value})
    dropin, theirs = getattr(hf, type(ref).__name__)(), type(ref)()  # class defaults, both
    try:
        want = theirs(rgb, return_tensors="np", **{key: value})
    except Exception as exc:  # noqa: BLE001 (transformers' error is what the drop-in raises)
        with pytest.raises(type(exc)):
            dropin(rgb, return_tensors="np", **{key: value})
        return
    got = dropin(rgb, return_tensors="np", **{key: value})
    for name in want:
        assert np.array_equal(np.asarray(got[name]), np.asarray(want[name])), name


@pytest.mark.parametrize("value", [1.5, 2.7, 2.0, "2", "bilinear", np.int64(2), np.array(2)])
def test_a_resample_that_is_not_an_int(value, rgb):
    """A resample smg-fast does not compute: UnsupportedCallError, and the drop-in hands it over.

    transformers' class takes any resample and computes with it (1.5 is not int(1.5)'s filter)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    with pytest.raises(UnsupportedCallError, match="resample"):
        smg_fast.load_processor("qwen2_vl")(rgb, resample=value)
    want = Theirs()(rgb, return_tensors="np", resample=value)
    got = Qwen2VLImageProcessorPil()(rgb, return_tensors="np", resample=value)
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize("value", [2, PILImage.Resampling.BILINEAR])
def test_an_int_resample_is_computed(value, rgb):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    want = Theirs()(rgb, return_tensors="np", resample=value)
    assert not np.array_equal(want["pixel_values"], Theirs()(rgb, return_tensors="np")[
        "pixel_values"])  # not the default filter
    got = smg_fast.load_processor("qwen2_vl")(rgb, resample=value)
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize("options", [{"image_mean": [float("nan")] * 3},
                                     {"image_std": float("inf")}, {"image_mean": float("-inf")}])
def test_a_mean_or_std_that_is_not_finite(options, rgb):
    """transformers computes with them (NaN or infinite values): the drop-in hands them over."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil as Theirs,
    )

    with pytest.raises(UnsupportedCallError, match="finite"):
        smg_fast.load_processor("qwen2_vl")(rgb, **options)
    want = Theirs()(rgb, return_tensors="np", **options)
    got = Qwen2VLImageProcessorPil()(rgb, return_tensors="np", **options)
    for key in ("pixel_values", "image_grid_thw"):
        assert np.array_equal(got[key], want[key], equal_nan=True), key
