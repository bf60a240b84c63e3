"""Undecoded JPEG images (smg_fast.imaging.lazy_jpeg), as the vLLM media connector makes them.

Pillow is the reference for every pixel a lazy image gives, through every way of reading it; the
processor's output from one is compared with transformers' own processor on Pillow's decode.
"""

from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
from PIL import Image, ImageOps
from support.engine_common import jpeg

from smg_fast.imaging.lazy_jpeg import LazyJpegImageFile, encoded_source, open_lazy_jpeg


def _pillow(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@pytest.fixture(scope="module")
def photo_jpeg(real_images) -> bytes:
    return jpeg(real_images.rgb("coffee"))


def test_eligible_jpegs_open_undecoded_and_remember_their_bytes(real_images):
    rgb = real_images.rgb("coffee")
    for data in (jpeg(rgb), jpeg(rgb, progressive=True), jpeg(rgb, exif_orientation=1),
                 jpeg(rgb, subsampling=0)):
        image = open_lazy_jpeg(data)
        assert isinstance(image, LazyJpegImageFile) and image.undecoded
        assert image.size == rgb.size and image.mode == "RGB" and image.format == "JPEG"
        assert encoded_source(image) == data


def test_jpegs_whose_decode_changes_them_are_not_made_lazy(real_images):
    rgb = real_images.rgb("coffee")
    png = io.BytesIO()
    rgb.save(png, "PNG")
    for data in (jpeg(rgb, exif_orientation=6), jpeg(rgb, exif_orientation=3),
                 jpeg(rgb.convert("L")), jpeg(rgb.convert("CMYK")), png.getvalue(), b"",
                 b"\xff\xd8"[:1]):
        assert open_lazy_jpeg(data) is None


def test_bytes_pillow_cannot_open_raise_pillows_error():
    with pytest.raises(OSError):  # UnidentifiedImageError
        open_lazy_jpeg(b"\xff\xd8\xff\xe0 not a jpeg at all")


def test_every_pixel_read_gives_pillows_pixels(photo_jpeg):
    ref = _pillow(photo_jpeg)
    want = np.asarray(ref)
    reads = {
        "asarray": lambda im: np.asarray(im),
        "tobytes": lambda im: np.frombuffer(im.tobytes(), np.uint8).reshape(want.shape),
        "getpixel": lambda im: np.array(im.getpixel((17, 5))),
        "load_access": lambda im: np.array(im.load()[17, 5]),
        "pickle": lambda im: np.asarray(pickle.loads(pickle.dumps(im))),
        "resize": lambda im: np.asarray(im.resize((97, 61), Image.Resampling.BICUBIC)),
        "convert_L": lambda im: np.asarray(im.convert("L")),
        "crop": lambda im: np.asarray(im.crop((3, 4, 120, 90))),
        "copy": lambda im: np.asarray(im.copy()),
        "exif_transpose": lambda im: np.asarray(ImageOps.exif_transpose(im)),
    }
    expected = {
        "asarray": want, "tobytes": want, "getpixel": np.array(ref.getpixel((17, 5))),
        "load_access": np.array(ref.getpixel((17, 5))), "pickle": want,
        "resize": np.asarray(ref.resize((97, 61), Image.Resampling.BICUBIC)),
        "convert_L": np.asarray(ref.convert("L")), "crop": np.asarray(ref.crop((3, 4, 120, 90))),
        "copy": want, "exif_transpose": want,
    }
    for name, read in reads.items():
        got = read(open_lazy_jpeg(photo_jpeg))
        assert np.array_equal(got, expected[name]), name


def test_transpose_and_copy_stay_undecoded(photo_jpeg):
    """vLLM's exif_transpose (load() then copy()) and RGB conversion decode nothing."""
    image = open_lazy_jpeg(photo_jpeg)
    image.load()
    out = ImageOps.exif_transpose(image)
    assert image.undecoded and isinstance(out, LazyJpegImageFile) and out.undecoded
    assert encoded_source(out) == photo_jpeg
    assert encoded_source(copy.copy(image)) == photo_jpeg
    assert np.array_equal(np.asarray(out), np.asarray(_pillow(photo_jpeg)))


def test_a_decoded_or_changed_image_gives_no_bytes(photo_jpeg):
    image = open_lazy_jpeg(photo_jpeg)
    image.putpixel((0, 0), (1, 2, 3))  # decodes, then edits in place
    assert encoded_source(image) is None and image.getpixel((0, 0)) == (1, 2, 3)
    drafted = open_lazy_jpeg(photo_jpeg)
    drafted.draft("RGB", (drafted.width // 2, drafted.height // 2))
    assert encoded_source(drafted) is None
    assert np.array_equal(np.asarray(drafted.copy()), np.asarray(drafted))
    for mode in ("L", "YCbCr"):  # drafted to another mode at the same size: copies keep it
        grey = open_lazy_jpeg(photo_jpeg)
        grey.draft(mode, None)
        ref = Image.open(io.BytesIO(photo_jpeg))
        ref.draft(mode, None)
        assert encoded_source(grey) is None and grey.copy().mode == mode
        assert np.array_equal(np.asarray(grey.copy()), np.asarray(ref.copy()))
    assert encoded_source(Image.open(io.BytesIO(photo_jpeg))) is None  # Pillow's own: not ours
    assert encoded_source(np.zeros((2, 2, 3), np.uint8)) is None


def test_processor_reads_a_lazy_jpeg_as_transformers_reads_pillows_decode(
        photo_jpeg, real_images, ours, hf_qwen2, hf_run, check):
    """The processor decodes the bytes itself and leaves the image undecoded; exact.

    The torchvision numerics are proven the same way in vLLM's own pipeline
    (tests/engines/test_engine_vllm.py)."""
    big = jpeg(real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS))
    lazies = [open_lazy_jpeg(big), open_lazy_jpeg(photo_jpeg)]
    out = ours("qwen2_vl", backend="pil")(lazies, return_tensors="np")
    assert all(image.undecoded for image in lazies)
    ref_pv, ref_grid = hf_run(hf_qwen2, [_pillow(big), _pillow(photo_jpeg)])
    check(out, ref_pv, ref_grid)


def test_truncated_jpeg_fails_as_invalid_image(photo_jpeg, ours):
    from smg_fast.errors import InvalidImageError

    image = open_lazy_jpeg(photo_jpeg[: len(photo_jpeg) // 2])
    with pytest.raises(InvalidImageError, match="truncated"):
        ours("qwen2_vl")([image])
    with pytest.raises(OSError, match="truncated"):
        np.asarray(open_lazy_jpeg(photo_jpeg[: len(photo_jpeg) // 2]))


def test_threads_reading_one_lazy_image_all_get_pillows_pixels(photo_jpeg):
    """Reads that race for the first decode wait for one decode (no half-decoded pixels)."""
    import threading

    want = np.asarray(_pillow(photo_jpeg))
    for _ in range(10):
        image = open_lazy_jpeg(photo_jpeg)
        start = threading.Barrier(4)
        got: list = [None] * 4

        def read(i, image=image, start=start, got=got):
            start.wait()
            try:
                got[i] = np.asarray(image) if i % 2 else np.asarray(image.copy().convert("RGB"))
            except Exception as exc:
                got[i] = exc

        threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for out in got:
            assert not isinstance(out, Exception), out
            assert np.array_equal(out, want)


def test_lazy_jpeg_is_accepted_as_the_decoded_image_it_stands_for(photo_jpeg, smg):
    """An allowlist without JPEG: the lazy image computes as the engine's decoded copy would."""
    proc = smg.load_processor("qwen2_vl", backend="pil", image_formats=["PNG", "WEBP"])
    decoded = _pillow(photo_jpeg).copy()
    want = proc([decoded], return_tensors="np")["pixel_values"]
    got = proc([open_lazy_jpeg(photo_jpeg)], return_tensors="np")["pixel_values"]
    assert np.array_equal(got, want)


def test_pickles_load_where_smg_fast_is_not(photo_jpeg):
    """A pickled lazy image is Pillow's plain decoded image: no smg_fast class in the pickle."""
    data = pickle.dumps(open_lazy_jpeg(photo_jpeg))
    assert b"smg_fast" not in data
    back = pickle.loads(data)
    assert type(back) is Image.Image
    assert np.array_equal(np.asarray(back), np.asarray(_pillow(photo_jpeg)))
