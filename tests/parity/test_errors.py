"""Bad input raises InvalidImageError naming the image index.

InvalidImageError is a ValueError; the processor stays usable."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from PIL import Image
from support.images import encode
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize


def _bad_inputs(real_images, tmp_path):
    jpeg = real_images.bytes("rocket")
    return {
        "undecodable_bytes": b"this is not an image at all" * 10,
        "empty_bytes": b"",
        "truncated_jpeg_half": jpeg[: len(jpeg) // 2],
        "truncated_jpeg_header": jpeg[:200],
        "zero_size_numpy": np.zeros((0, 10, 3), np.uint8),
        "zero_width_numpy": np.zeros((10, 0, 3), np.uint8),
        "float32_numpy": real_images.rgb_array("chelsea").astype(np.float32),
        "uint16_numpy": real_images.rgb_array("chelsea").astype(np.uint16),
        "4d_numpy": real_images.rgb_array("chelsea")[None],
        "2_channels": real_images.rgb_array("chelsea")[:, :, :2].copy(),
        "5_channels": np.concatenate(
            [real_images.rgb_array("chelsea"), real_images.rgb_array("chelsea")[:, :, :2]], axis=2
        ),
        "missing_path_str": str(tmp_path / "does_not_exist.jpg"),
        "missing_path": tmp_path / "does_not_exist.png",
        "directory_path": tmp_path,
    }


BAD_KINDS = [
    "undecodable_bytes",
    "empty_bytes",
    "truncated_jpeg_half",
    "truncated_jpeg_header",
    "zero_size_numpy",
    "zero_width_numpy",
    "2_channels",
    "5_channels",
    "missing_path_str",
    "missing_path",
    "directory_path",
]


def test_truncated_jpeg_is_really_bad_for_pillow(real_images):
    """Sanity check of the fixture: Pillow itself refuses the truncated file."""
    import io

    jpeg = real_images.bytes("rocket")
    with pytest.raises(OSError):
        Image.open(io.BytesIO(jpeg[: len(jpeg) // 2])).load()


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_single_input(family, kind, real_images, tmp_path, ours, smg, reference,
                          assert_equal):
    proc = ours(family)
    bad = _bad_inputs(real_images, tmp_path)[kind]
    with pytest.raises(smg.InvalidImageError, match=r"\bimage 0\b") as info:
        proc(bad, return_tensors="np")
    assert isinstance(info.value, ValueError)
    # still exact afterwards
    out = proc(real_images.open("chelsea"), return_tensors="np")
    assert_equal(out["pixel_values"], reference(family, real_images.open("chelsea")))


@pytest.mark.parametrize(
    "kind", ["undecodable_bytes", "truncated_jpeg_half", "5_channels", "missing_path"]
)
@pytest.mark.parametrize("position", [0, 1, 3])
def test_bad_input_index_in_batch(kind, position, real_images, tmp_path, ours, smg):
    proc = ours("qwen2_vl")
    ref = proc(real_images.open("rocket"), return_tensors="np")
    batch = [real_images.open("rocket") for _ in range(4)]
    batch[position] = _bad_inputs(real_images, tmp_path)[kind]
    with pytest.raises(smg.InvalidImageError, match=rf"\bimage {position}\b"):
        proc(batch, return_tensors="np")
    # the processor (and its pools) are intact: same result as before the error
    again = proc(real_images.open("rocket"), return_tensors="np")
    assert np.array_equal(np.asarray(again["pixel_values"]), np.asarray(ref["pixel_values"]))


@pytest.mark.parametrize("w,h", [(1, 201), (300, 1), (5, 1006)])
def test_aspect_ratio_over_200(w, h, real_images, ours, smg):
    for family in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):
        image = real_images.rgb("retina").crop((0, 0, w, h))
        with pytest.raises(smg.InvalidImageError, match=r"\bimage 1\b"):
            ours(family)([real_images.open("chelsea"), image], return_tensors="np")
        with pytest.raises(smg.InvalidImageError, match=r"\bimage 0\b"):
            ours(family)(np.asarray(image), return_tensors="np")


def test_aspect_ratio_error_without_pixels(ours):
    proc = ours("qwen2_vl")
    with pytest.raises(ValueError):
        proc.num_tokens(1, 201)
    with pytest.raises(ValueError):
        proc.grid(201, 1)
    rh, rw = smart_resize(200, 1, factor=28, min_pixels=3136, max_pixels=12845056)
    assert proc.num_tokens(1, 200) == (rh // 14) * (rw // 14) // 4  # transformers' arithmetic


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl", "kimi_k25"])
def test_max_image_pixels(family, real_images, ours, smg, reference, assert_equal):
    proc = ours(family, max_image_pixels=100 * 100)
    small = real_images.rgb("chelsea").resize((90, 60))
    big = real_images.rgb("chelsea")  # 451x300 = 135300 px
    want = reference(family, small)
    assert_equal(proc(small, return_tensors="np")["pixel_values"], want)
    for src in (big, np.asarray(big), encode(big, "PNG"), encode(big, "JPEG")):
        with pytest.raises(smg.InvalidImageError, match=r"\bimage 0\b"):
            proc(src, return_tensors="np")
    with pytest.raises(smg.InvalidImageError, match=r"\bimage 2\b"):
        proc([small, small, big], return_tensors="np")
    assert_equal(proc(small, return_tensors="np")["pixel_values"], want)


def _png_bomb(w: int, h: int) -> bytes:
    """A valid 8-bit grey PNG of w x h zeros, written row by row (small file, no big buffer)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    comp = zlib.compressobj(9)
    row = b"\0" * (w + 1)  # filter byte + pixels
    idat = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_max_image_pixels_on_decompression_bomb(ours, smg, real_images):
    """A 97 KB PNG that declares 10000x10000 pixels is refused (by its header size)."""
    bomb = _png_bomb(10000, 10000)
    assert len(bomb) < 500_000
    for family in ("qwen2_vl", "kimi_k25"):
        proc = ours(family, max_image_pixels=1_000_000)
        with pytest.raises(smg.InvalidImageError, match=r"\bimage 1\b"):
            proc([real_images.open("chelsea"), bomb], return_tensors="np")


def test_wrong_python_type(ours, smg):
    proc = ours("qwen2_vl")
    for bad in (12345, 3.5, object(), {"a": 1}):
        with pytest.raises(smg.InvalidImageError,
                           match=rf"^image 0: unsupported input type {type(bad).__name__}$"):
            proc(bad, return_tensors="np")


def test_empty_list(ours):
    with pytest.raises(ValueError, match="no images given"):
        ours("qwen2_vl")([], return_tensors="np")


def test_messages_name_the_input_never_an_object_repr(tmp_path, ours, smg):
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"not an image" * 4)
    proc = ours("qwen2_vl")
    for bad, named in ((b"not an image" * 4, "the 48 bytes"),
                       (bytearray(b"x" * 30), "the 30 bytes"),
                       (str(junk), repr(str(junk))), (junk, repr(str(junk)))):
        with pytest.raises(smg.InvalidImageError) as info:
            proc(bad, return_tensors="np")
        msg = str(info.value)
        assert named in msg and "object at 0x" not in msg, msg


def test_error_message_is_informative(real_images, tmp_path, ours, smg):
    proc = ours("qwen2_vl")
    with pytest.raises(smg.InvalidImageError) as info:
        proc([real_images.open("chelsea"), np.zeros((5, 5, 2), np.uint8)], return_tensors="np")
    msg = str(info.value)
    assert msg.startswith("image 1") or "image 1:" in msg, msg


@pytest.mark.parametrize("kind", ["float32_numpy", "uint16_numpy", "4d_numpy"])
def test_inputs_transformers_accepts_are_accepted(kind, real_images, tmp_path, ours):
    """Inputs transformers' processor takes are taken too, with the same output.

    Float 0-255, other integer types, a batch of one.
    """
    from support.hf_oracle import make_hf_qwen

    x = _bad_inputs(real_images, tmp_path)[kind]
    want = make_hf_qwen("qwen2_vl")(x, return_tensors="np")["pixel_values"]
    assert np.array_equal(ours("qwen2_vl")(x, return_tensors="np")["pixel_values"], want)
