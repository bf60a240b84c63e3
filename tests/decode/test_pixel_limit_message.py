"""One pixel limit, one message.

An image whose declared size Pillow itself refuses at open (over twice PIL.Image.MAX_IMAGE_PIXELS)
is refused in the words of our own limit, naming the setting and the limit in force, as an image
just over the limit is."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from smg_fast import InvalidImageError, load_processor


def _declared_png(w: int, h: int) -> bytes:
    """A PNG header declaring w x h grey pixels, with a token IDAT (opening never inflates it)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 8))
            + chunk(b"IEND", b""))


def _refusal(proc, data: bytes) -> str:
    with pytest.raises(InvalidImageError) as info:
        proc(data, return_tensors="np")
    return str(info.value)


def test_pillow_bomb_and_our_limit_say_the_same():
    limit = Image.MAX_IMAGE_PIXELS  # the default max_image_pixels is Pillow's limit
    proc = load_processor("qwen2_vl")
    with pytest.raises(Image.DecompressionBombError):  # what Pillow alone says of it
        Image.open(io.BytesIO(_declared_png(100_000, 100_000)))
    huge = _refusal(proc, _declared_png(100_000, 100_000))
    near = _refusal(proc, _declared_png(limit // 1000 + 1, 1000))
    for msg in (huge, near):
        assert f"exceeds the limit of {limit} pixels set by max_image_pixels" in msg, msg
        assert "--max-image-pixels" in msg and str(2 * limit) not in msg, msg
    assert "10000000000 pixels" in huge


def test_a_limit_over_pillows_refusal_says_so():
    proc = load_processor("qwen2_vl", max_image_pixels=4 * Image.MAX_IMAGE_PIXELS)
    msg = _refusal(proc, _declared_png(20_000, 10_000))  # 2e8: over Pillow's 2x, under ours
    assert "PIL.Image.MAX_IMAGE_PIXELS" in msg and "max_image_pixels" in msg, msg
