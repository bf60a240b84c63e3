"""Bit-exact parity of the Qwen2/2.5/3-VL processors with transformers' Qwen2VLImageProcessorPil.

Every comparison is np.array_equal on float32 pixel_values plus equality of image_grid_thw and of
the token counts; the oracle is always called with return_tensors="np".
"""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.images import encode
from transformers.image_utils import load_image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize


def _crop(im: Image.Image, w: int, h: int, x0: int = 0, y0: int = 0) -> Image.Image:
    return im.crop((x0, y0, x0 + w, y0 + h))


# ---------------------------------------------------------------------------------------------
# Real images, PIL objects
# ---------------------------------------------------------------------------------------------


def test_real_image(qwen_family, real_image_name, real_images, ours, hf_qwen, hf_run, check):
    image = real_images.open(real_image_name)
    ref_pv, ref_grid = hf_run(hf_qwen(qwen_family), real_images.open(real_image_name))
    out = ours(qwen_family)(image, return_tensors="np")
    check(out, ref_pv, ref_grid)
    # the input object must not be modified
    assert image.mode == real_images.open(real_image_name).mode


def test_pil_mode(qwen_family, mode_kind, real_images, ours, hf_qwen, hf_run, check):
    ref_pv, ref_grid = hf_run(hf_qwen(qwen_family), real_images.mode_image(mode_kind))
    out = ours(qwen_family)(real_images.mode_image(mode_kind), return_tensors="np")
    check(out, ref_pv, ref_grid)


def test_single_image_in_list_equals_bare(real_images, ours):
    proc = ours("qwen2_vl")
    a = proc(real_images.open("chelsea"), return_tensors="np")
    b = proc([real_images.open("chelsea")], return_tensors="np")
    assert np.array_equal(a["pixel_values"], b["pixel_values"])
    assert np.array_equal(a["image_grid_thw"], b["image_grid_thw"])


def test_output_is_dict_with_keys(real_images, ours):
    """A dict of the three outputs, shaped by the grid transformers computes for the image."""
    out = ours("qwen2_vl")(real_images.open("chelsea"), return_tensors="np")
    assert isinstance(out, dict)
    assert set(out.keys()) == {"pixel_values", "image_grid_thw", "num_tokens"}
    rh, rw = smart_resize(300, 451, factor=28, min_pixels=3136, max_pixels=12845056)  # 451x300
    gh, gw = rh // 14, rw // 14
    assert np.asarray(out["image_grid_thw"]).tolist() == [[1, gh, gw]]
    assert np.asarray(out["pixel_values"]).shape == (gh * gw, 3 * 2 * 14 * 14)
    assert [int(n) for n in np.asarray(out["num_tokens"]).reshape(-1)] == [gh * gw // 4]


# ---------------------------------------------------------------------------------------------
# Encoded bytes and paths: transformers' load_image semantics (EXIF applied, alpha dropped)
# ---------------------------------------------------------------------------------------------


def _hf_from_encoded(hf, data: bytes, hf_run):
    return hf_run(hf, load_image(base64.b64encode(data).decode("ascii")))


@pytest.mark.parametrize("name", ["rocket", "chelsea", "camera", "logo", "logo2"])
def test_bytes_input(qwen_family, name, real_images, ours, hf_qwen, hf_run, check):
    data = real_images.bytes(name)
    ref_pv, ref_grid = _hf_from_encoded(hf_qwen(qwen_family), data, hf_run)
    check(ours(qwen_family)(data, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("kind", ["P_transparency", "RGBA", "LA", "P", "1"])
def test_bytes_input_encoded_modes(kind, real_images, ours, hf_qwen, hf_run, check):
    """PNG-encoded mode images.

    A palette PNG with a transparency index is the subtle one: after load_image it is an RGB image
    whose info["transparency"] colour key makes the oracle turn every pixel of that colour white."""
    data = encode(real_images.mode_image(kind), "PNG")
    ref_pv, ref_grid = _hf_from_encoded(hf_qwen("qwen2_vl"), data, hf_run)
    check(ours("qwen2_vl")(data, return_tensors="np"), ref_pv, ref_grid)


def test_bytes_types(real_images, ours, hf_qwen, hf_run, check):
    """bytes, bytearray and memoryview of one JPEG: each exact against transformers."""
    data = real_images.bytes("chelsea")
    ref_pv, ref_grid = _hf_from_encoded(hf_qwen("qwen2_vl"), data, hf_run)
    proc = ours("qwen2_vl")
    for variant in (data, bytearray(data), memoryview(data)):
        check(proc(variant, return_tensors="np"), ref_pv, ref_grid)


def test_path_input_applies_exif(qwen_family, exif_rotated_jpeg, ours, hf_qwen, hf_run, check):
    ref_pv, ref_grid = hf_run(hf_qwen(qwen_family), load_image(str(exif_rotated_jpeg)))
    proc = ours(qwen_family)
    for src in (str(exif_rotated_jpeg), Path(exif_rotated_jpeg), exif_rotated_jpeg.read_bytes()):
        check(proc(src, return_tensors="np"), ref_pv, ref_grid)


def test_exif_rotation_changes_grid(exif_rotated_jpeg, ours):
    """The photo is 640x427 on disk; displayed (orientation 6) it is 427 wide and 640 tall."""
    proc = ours("qwen2_vl")
    out = proc(str(exif_rotated_jpeg), return_tensors="np")
    assert np.asarray(out["image_grid_thw"]).tolist() == [list(proc.grid(427, 640))]


def test_pil_object_ignores_exif(exif_rotated_jpeg, ours, hf_qwen, hf_run, check):
    """A PIL object is taken as is (the oracle does not apply EXIF to PIL inputs)."""
    with Image.open(exif_rotated_jpeg) as im:
        im.load()
        ref_pv, ref_grid = hf_run(hf_qwen("qwen2_vl"), im.copy())
        out = ours("qwen2_vl")(im.copy(), return_tensors="np")
    check(out, ref_pv, ref_grid)


def test_png_path_with_alpha_dropped(real_images, ours, hf_qwen, hf_run, check):
    path = real_images.path("logo2")
    ref_pv, ref_grid = hf_run(hf_qwen("qwen3_vl"), load_image(str(path)))
    check(ours("qwen3_vl")(path, return_tensors="np"), ref_pv, ref_grid)


# ---------------------------------------------------------------------------------------------
# Several images per call
# ---------------------------------------------------------------------------------------------


def _mixed_batch(real_images):
    return [
        real_images.open("chelsea"),
        real_images.mode_image("RGBA"),
        real_images.bytes("rocket"),
        real_images.rgb_array("coffee"),
        real_images.open("camera"),
    ]


def test_multi_image_equals_concatenation(qwen_family, real_images, ours, check):
    proc = ours(qwen_family)
    batch = proc(_mixed_batch(real_images), return_tensors="np")
    singles = [proc(x, return_tensors="np") for x in _mixed_batch(real_images)]
    ref_pv = np.concatenate([np.asarray(s["pixel_values"]) for s in singles], axis=0)
    ref_grid = np.concatenate([np.asarray(s["image_grid_thw"]) for s in singles], axis=0)
    check(batch, ref_pv, ref_grid)
    assert len(np.asarray(batch["num_tokens"]).reshape(-1)) == 5


def test_multi_image_equals_hf_batch(real_images, ours, hf_qwen, hf_run, check):
    images = [real_images.open("chelsea"), real_images.mode_image("LA"), real_images.open("rocket")]
    ref_pv, ref_grid = hf_run(
        hf_qwen("qwen2_5_vl"),
        [real_images.open("chelsea"), real_images.mode_image("LA"), real_images.open("rocket")],
    )
    check(ours("qwen2_5_vl")(images, return_tensors="np"), ref_pv, ref_grid)


def test_same_image_twice(real_images, ours):
    proc = ours("qwen2_vl")
    one = proc(real_images.open("coffee"), return_tensors="np")
    two = proc([real_images.open("coffee"), real_images.open("coffee")], return_tensors="np")
    pv1 = np.asarray(one["pixel_values"])
    assert np.array_equal(np.asarray(two["pixel_values"]), np.concatenate([pv1, pv1]))


# ---------------------------------------------------------------------------------------------
# Edge sizes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "w,h",
    [(1, 1), (1, 200), (200, 1), (2, 400), (70, 98), (98, 70), (28, 28), (27, 29), (33, 1)],
)
def test_edge_sizes(qwen_family, w, h, real_images, ours, hf_qwen, hf_run, check):
    """Crops of a real photo; 70 and 98 exercise round-half-to-even (2.5 -> 2, 3.5 -> 4)."""
    src = real_images.rgb("astronaut")
    image = _crop(src, w, h, 100, 50)
    ref_pv, ref_grid = hf_run(hf_qwen(qwen_family), _crop(src, w, h, 100, 50))
    check(ours(qwen_family)(image, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("w,h", [(1, 201), (201, 1), (2, 403), (403, 2)])
def test_aspect_over_200_rejected(w, h, real_images, ours, smg):
    proc = ours("qwen2_vl")
    image = _crop(real_images.rgb("astronaut"), w, h)
    with pytest.raises(smg.InvalidImageError, match=r"\bimage 0\b"):
        proc(image, return_tensors="np")
    # as the third image of a batch the index is named
    with pytest.raises(smg.InvalidImageError, match=r"\bimage 2\b"):
        proc([real_images.open("chelsea"), real_images.open("chelsea"), image], return_tensors="np")
    # the oracle agrees that this is an error
    with pytest.raises(ValueError):
        smart_resize(h, w, factor=28, min_pixels=3136, max_pixels=12845056)


def _branch(h: int, w: int, factor: int, min_pixels: int, max_pixels: int) -> str:
    hb = round(h / factor) * factor
    wb = round(w / factor) * factor
    if hb * wb > max_pixels:
        return "max"
    if hb * wb < min_pixels:
        return "min"
    return "none"


def _threshold_cases(factor: int):
    f, half = factor, factor // 2
    return [
        # (w, h, expected smart_resize branch) with min = 16 f^2, max = 64 f^2
        (8 * f, 8 * f, "none"),  # exactly max_pixels
        (8 * f + half, 8 * f, "none"),  # 8.5 rounds to 8: still exactly max
        (8 * f + half + 1, 8 * f, "max"),  # just above max
        (8 * f, 9 * f, "max"),
        (4 * f, 4 * f, "none"),  # exactly min_pixels
        (4 * f - half, 4 * f, "none"),  # 3.5 rounds to 4: exactly min
        (4 * f - half - 1, 4 * f, "min"),  # just below min
        (4 * f, 4 * f + half, "none"),  # 4.5 rounds to 4
        (3 * f, 3 * f, "min"),
        (10 * f, 7 * f, "max"),
        (f, 200 * f, "max"),  # max branch with the max(factor, .) clamp on the short side
    ]


@pytest.mark.parametrize("case", range(11))
def test_min_max_pixel_thresholds(qwen_family, case, real_images, ours, hf_qwen, hf_run, check):
    patch = 16 if qwen_family == "qwen3_vl" else 14
    factor = 2 * patch
    min_pixels, max_pixels = 16 * factor * factor, 64 * factor * factor
    w, h, branch = _threshold_cases(factor)[case]
    assert _branch(h, w, factor, min_pixels, max_pixels) == branch  # the case means what it says

    src = real_images.rgb("retina")  # 1411x1411
    if w <= src.width and h <= src.height:
        image = _crop(src, w, h, 200, 200)
    else:
        image = src.resize((w, h), Image.Resampling.BILINEAR)
    proc = ours(qwen_family, min_pixels=min_pixels, max_pixels=max_pixels)
    assert proc.config.min_pixels == min_pixels and proc.config.max_pixels == max_pixels
    hf = hf_qwen(qwen_family, min_pixels=min_pixels, max_pixels=max_pixels)
    ref_pv, ref_grid = hf_run(hf, image.copy())
    check(proc(image, return_tensors="np"), ref_pv, ref_grid)

    rh, rw = smart_resize(h, w, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    assert tuple(proc.grid(w, h)) == (1, rh // patch, rw // patch)
    assert proc.num_tokens(w, h) == (rh // patch) * (rw // patch) // 4


def test_max_branch_has_no_recheck(ours):
    """no re-check after the max branch; 28x5600 with max 64*28^2 stays over max."""
    proc = ours("qwen2_vl", min_pixels=16 * 784, max_pixels=64 * 784)
    rh, rw = smart_resize(5600, 28, factor=28, min_pixels=16 * 784, max_pixels=64 * 784)
    assert rh * rw > 64 * 784
    assert tuple(proc.grid(28, 5600)) == (1, rh // 14, rw // 14)


# ---------------------------------------------------------------------------------------------
# NumPy inputs
# ---------------------------------------------------------------------------------------------


def _numpy_inputs(real_images):
    rgb = real_images.rgb_array("chelsea")
    grey = np.asarray(real_images.open("camera"))
    rgba = np.asarray(real_images.mode_image("RGBA"))
    logo = np.asarray(real_images.open("logo"))
    return {
        "hw": grey,
        "hw1": grey[:, :, None],
        "hw3": rgb,
        "hw4": rgba,
        "hw4_logo": logo,
    }


@pytest.mark.parametrize("kind", ["hw", "hw1", "hw3", "hw4", "hw4_logo"])
def test_numpy_input(qwen_family, kind, real_images, ours, hf_qwen, hf_run, check):
    arr = _numpy_inputs(real_images)[kind]
    assert arr.dtype == np.uint8
    # the oracle needs an explicit channel axis; (H, W) is the same picture as (H, W, 1)
    ref_in = arr[:, :, None] if arr.ndim == 2 else arr
    ref_pv, ref_grid = hf_run(
        hf_qwen(qwen_family), ref_in.copy(), input_data_format="channels_last"
    )
    before = arr.copy()
    check(ours(qwen_family)(arr, return_tensors="np"), ref_pv, ref_grid)
    assert np.array_equal(arr, before), "input array was modified"


def test_numpy_equals_pil(real_images, ours):
    proc = ours("qwen3_vl")
    a = proc(real_images.rgb_array("rocket"), return_tensors="np")
    b = proc(real_images.rgb("rocket"), return_tensors="np")
    assert np.array_equal(a["pixel_values"], b["pixel_values"])
    assert np.array_equal(a["image_grid_thw"], b["image_grid_thw"])


@pytest.mark.parametrize("view", ["crop", "step", "flip", "fortran"])
def test_numpy_strided_views(view, real_images, ours, hf_qwen, hf_run, check):
    """Non-contiguous arrays must be read through their strides, not as if they were dense."""
    base = real_images.rgb_array("coffee")
    arr = {
        "crop": base[37:311, 51:530],
        "step": base[::2, ::3],
        "flip": base[::-1, ::-1],
        "fortran": np.asfortranarray(base),
    }[view]
    assert not arr.flags.c_contiguous
    ref_pv, ref_grid = hf_run(
        hf_qwen("qwen2_vl"), np.ascontiguousarray(arr), input_data_format="channels_last"
    )
    check(ours("qwen2_vl")(arr, return_tensors="np"), ref_pv, ref_grid)


def test_tiny_numpy_shapes(qwen_family, ours, hf_qwen, hf_run, check, real_images):
    """Shapes where the oracle's channel-axis guess is ambiguous: give it channels_last."""
    base = real_images.rgb_array("astronaut")
    for arr in (base[:3, :4], base[:1, :1], base[:4, :3], base[:1, :3]):
        arr = np.ascontiguousarray(arr)
        ref_pv, ref_grid = hf_run(
            hf_qwen(qwen_family), arr.copy(), input_data_format="channels_last"
        )
        check(ours(qwen_family)(arr, return_tensors="np"), ref_pv, ref_grid)


def test_family_constants(smg):
    # the first built-ins; test_registry names every family in order
    assert smg.FAMILIES[:4] == ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25")
    assert issubclass(smg.InvalidImageError, ValueError)


def test_grid_width_height_order(ours):
    """grid(width, height): a wide image has more columns than rows."""
    t, gh, gw = ours("qwen2_vl").grid(1920, 1080)
    assert (t, gh, gw) == (1, 78, 138)
    assert math.prod((t, gh, gw)) // 4 == ours("qwen2_vl").num_tokens(1920, 1080)


# ---------------------------------------------------------------------------------------------
# PIL objects in less common states
# ---------------------------------------------------------------------------------------------


def test_lazy_pil_object(real_images, ours, hf_qwen, hf_run, check):
    """Image.open() without load(): the pixels are read on demand."""
    with (
        Image.open(real_images.path("rocket")) as lazy,
        Image.open(real_images.path("rocket")) as r,
    ):
        ref_pv, ref_grid = hf_run(hf_qwen("qwen2_vl"), r)
        check(ours("qwen2_vl")(lazy, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("one_block", [False, True])
@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_image_larger_than_pillow_block(mode, one_block, real_images, ours, hf_qwen, hf_run, check,
                                        pillow_allocator, monkeypatch):
    """The result does not depend on how Pillow stores a large image.

    Pillow stores images over its block size (16 MiB) in several blocks, so they have no single
    contiguous buffer, unless its single-block allocator is on (then they are read in place).
    RGBA (a varying alpha, composited onto white) checks that each pixel's fourth byte is read
    from the right block too."""
    pillow_allocator(one_block)
    big = real_images.rgb("retina").resize((2600, 1800), Image.Resampling.BILINEAR)
    if mode == "RGBA":
        alpha = np.add.outer(np.arange(1800) % 256, np.arange(2600) % 7 * 30).astype(np.uint8)
        big = Image.fromarray(np.dstack([np.asarray(big), alpha]), "RGBA").copy()  # Pillow-owned
    assert getattr(big.im, "isblock", lambda: False)() == one_block
    views = []
    if one_block:  # read where Pillow keeps it (its Arrow export), never copied first
        from smg_fast.imaging import pixels

        monkeypatch.setattr(pixels, "_pasted_rgbx", lambda img: pytest.fail("pasted"))
        arrow_rgbx = pixels._native.arrow_rgbx
        monkeypatch.setattr(pixels._native, "arrow_rgbx",
                            lambda *a: views.append(a[2:]) or arrow_rgbx(*a))
    kw = dict(min_pixels=3136, max_pixels=28 * 28 * 300)
    ref_pv, ref_grid = hf_run(hf_qwen("qwen2_vl", **kw), big.copy())
    check(ours("qwen2_vl", **kw)(big, return_tensors="np"), ref_pv, ref_grid)
    if one_block:
        assert views == [(2600, 1800)]
