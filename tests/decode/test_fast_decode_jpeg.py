"""The libjpeg-turbo fast path against Pillow and transformers' loading.

Every case is exact and takes the decoder it should; what the fast path does not cover goes to
Pillow; broken data fails exactly where the reference fails."""

from __future__ import annotations

import io

import numpy as np
import pytest
import simplejpeg
from PIL import Image, ImageCms
from support.decode_common import HF, check, ours, reference
from support.images import encode

from smg_fast.imaging import decoders

FAST, PIL = decoders.LIBJPEG_TURBO, decoders.PILLOW


@pytest.fixture(autouse=True, params=[decoders.PILLOW_LIBJPEG, decoders.SIMPLEJPEG])
def engine(request, monkeypatch) -> str:
    """Every case through both engines.

    Pillow's own libjpeg driven by the native core (banded on two threads for sequential images of
    256 rows or more), and simplejpeg."""
    assert decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG, (
        "the native core was built without jpeglib.h: run .ci/test_tools.sh, then pip install .")
    monkeypatch.setattr(decoders, "_jpeg_engine", request.param)
    return request.param


def jpeg(img: Image.Image, **kw) -> bytes:
    return encode(img, "JPEG", **kw)


@HF
@pytest.mark.parametrize("sub", ["4:4:4", "4:2:2", "4:2:0"])
@pytest.mark.parametrize("progressive", [False, True])
def test_pillow_encoded_subsamplings(photo, hf, sub, progressive):
    check(jpeg(photo, quality=90, subsampling=sub, progressive=progressive), hf, FAST)


@HF
@pytest.mark.parametrize("sub", ["440", "411"])
def test_uncommon_subsamplings(photo, hf, sub):
    data = simplejpeg.encode_jpeg(np.ascontiguousarray(np.asarray(photo)), quality=88,
                                  colorsubsampling=sub)
    check(data, hf, FAST)


@HF
def test_shipped_camera_jpegs(real_images, hf):
    for name in ("retina", "rocket", "hubble", "grace_hopper", "china", "flower"):
        check(real_images.bytes(name), hf, FAST)


@HF
def test_grayscale(photo, hf):
    check(jpeg(photo.convert("L"), quality=90), hf, FAST)
    check(jpeg(photo.convert("L"), quality=90, progressive=True), hf, FAST)


@HF
def test_cmyk_and_ycck_take_pillow(photo, hf):
    data = jpeg(photo.convert("CMYK"), quality=90)
    check(data, hf, PIL)
    # Adobe APP14 transform 2: the same 4 components read as YCCK.
    i = data.index(b"Adobe")
    ycck = data[: i + 11] + b"\x02" + data[i + 12:]
    assert ours(ycck, hf)[1] == PIL
    check(ycck, hf, PIL)


@HF
@pytest.mark.parametrize("blocks", [1, 7])
def test_restart_markers(photo, hf, blocks):
    data = jpeg(photo, quality=90, restart_marker_blocks=blocks)
    assert b"\xff\xd0" in data and b"\xff\xdd" in data  # markers present (DRI + RST0)
    check(data, hf, FAST)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientations(photo, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = jpeg(photo.crop((0, 0, 301, 173)), quality=90, exif=exif.tobytes())
    check(data, True, FAST)  # Qwen turns the image as load_image does
    check(data, False, FAST)  # Kimi ignores the orientation


def test_xmp_orientation(photo):
    xmp = b'<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>'
    data = jpeg(photo.crop((0, 0, 301, 173)), quality=90, xmp=xmp)
    assert reference(data, True).shape[:2] == (301, 173)  # the reference does turn it
    check(data, True, FAST)


@HF
def test_icc_profile_is_ignored(photo, hf):
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()
    check(jpeg(photo, quality=90, icc_profile=icc), hf, FAST)


@HF
@pytest.mark.parametrize("size", [(1, 1), (1, 37), (37, 1), (17, 9), (333, 1), (2, 513)])
def test_odd_sizes(photo, hf, size):
    img = photo.resize(size)
    for sub in ("4:2:0", "4:4:4"):
        check(jpeg(img, quality=95, subsampling=sub), hf, FAST)


@HF
def test_mpo_first_frame(photo, hf):
    b = io.BytesIO()
    photo.save(b, "MPO", save_all=True, append_images=[photo.rotate(90, expand=True)])
    data = b.getvalue()
    assert Image.open(io.BytesIO(data)).format == "MPO"
    check(data, hf, FAST)


@HF
@pytest.mark.parametrize("cut", [0.3, 0.9, -2, -1])
@pytest.mark.parametrize("progressive", [False, True])
def test_truncated(photo, hf, cut, progressive):
    data = jpeg(photo, quality=90, progressive=progressive)
    end = int(len(data) * cut) if isinstance(cut, float) else len(data) + cut
    # Pillow's choice, whatever it is, is ours: raise, or decode to the same pixels (Pillow's).
    check(data[:end], hf, PIL)


@HF
@pytest.mark.parametrize("progressive", [False, True])
def test_corrupt_entropy_data(photo, hf, progressive):
    data = bytearray(jpeg(photo, quality=90, progressive=progressive))
    start = data.rindex(b"\xff\xda")
    for k in range(8):
        data[start + 200 + k * 997] ^= 0x5A
    # libjpeg-turbo only warns ("Corrupt JPEG data"): strict mode declines and Pillow decides.
    check(bytes(data), hf, PIL)


@HF
def test_bad_header_is_refused_like_pillow(photo, hf):
    data = jpeg(photo, quality=90)
    sof = data.index(b"\xff\xc0")
    bad = data[: sof + 5] + b"\x00\x00" + data[sof + 7:]  # zero height
    with pytest.raises(Exception):  # noqa: B017,PT011 - the reference refuses it too
        reference(bad, hf)
    assert check(bad, hf, PIL) is not None


def test_no_engine_means_pillow(photo, monkeypatch):
    monkeypatch.setattr(decoders, "_jpeg_engine", None)
    check(jpeg(photo, quality=90), True, PIL)


def test_a_decoder_that_differs_is_switched_off(photo, monkeypatch, caplog, engine):
    monkeypatch.setattr(decoders, "_checked", {})  # as in a fresh process
    if engine == decoders.SIMPLEJPEG:
        real, owner, name = simplejpeg.decode_jpeg, simplejpeg, "decode_jpeg"

        def off_by_one(*args, **kwargs):
            out = real(*args, **kwargs)
            out[0, 0, 0] ^= 1
            return out
    else:
        real, owner, name = decoders._native.jpeg_decode, decoders._native, "jpeg_decode"

        def off_by_one(data, out, bands):
            status = real(data, out, bands)
            out[0, 0, 0] ^= 1
            return status

    monkeypatch.setattr(owner, name, off_by_one)
    check(jpeg(photo, quality=90), True, PIL)
    assert decoders.available() == {FAST: False, decoders.ZLIB_NG: True, decoders.ZLIB: True}
    assert "does not reproduce Pillow's pixels" in caplog.text


@HF
@pytest.mark.parametrize("kw", [{"lossless": True}, {"lossless": True, "predictor": 3},
                                {"colorspace": "RGB", "outcolorspace": "RGB"},
                                {"optimize": True}, {"smoothing": 50}],
                         ids=["lossless", "lossless-p3", "rgb-components", "optimized", "smooth"])
def test_other_encoders_jpegs(photo, hf, kw):
    """libjpeg-turbo's own encoder (imagecodecs).

    Lossless (SOF3), RGB components without YCbCr, optimized Huffman tables."""
    import imagecodecs

    check(imagecodecs.jpeg8_encode(np.asarray(photo), **kw), hf, FAST)


@HF
def test_12_bit_is_refused_like_pillow(photo, hf):
    import imagecodecs

    data = imagecodecs.jpeg8_encode(np.asarray(photo).astype(np.uint16) * 16, bitspersample=12)
    assert check(data, hf, PIL) is not None  # Pillow cannot open it; neither do we


@HF
@pytest.mark.parametrize("flags", [["-arithmetic"], ["-arithmetic", "-progressive"],
                                   ["-arithmetic", "-restart", "2"]],
                         ids=["baseline", "progressive", "restart"])
@pytest.mark.parametrize("sub", ["4:2:0", "4:4:4"])
def test_arithmetic_coding(photo, hf, flags, sub):
    """Arithmetic-coded JPEGs take Pillow's path: decoded, or refused, as Pillow does.

    They are SOF9 / SOF10, made losslessly from Pillow's by libjpeg-turbo's jpegtran (Debian's
    libjpeg-turbo-progs, which .ci/run installs): no Python encoder writes them. Pillow decodes them
    only while they fit its 64 KiB read block (libjpeg's arithmetic decoder cannot suspend), hence
    Pillow's path."""
    import shutil
    import subprocess

    tool = shutil.which("jpegtran")
    assert tool, "jpegtran is missing: apt-get install libjpeg-turbo-progs (.ci/run does)"
    data = subprocess.run([tool, "-copy", "all", *flags], input=jpeg(photo, quality=90,
                          subsampling=sub), capture_output=True, check=True).stdout
    sof = b"\xff\xca" if "-progressive" in flags else b"\xff\xc9"
    assert sof in data and decoders.jpeg_frame_marker(data) == sof[1]  # arithmetic-coded
    check(data, hf, PIL)
    # Truncated mid-scan: whatever Pillow does is ours (raise, or its pixels, never partial).
    check(data[: len(data) * 2 // 3], hf, PIL)


@pytest.mark.parametrize("progressive", [False, True])
def test_frame_marker(photo, progressive):
    data = jpeg(photo, quality=90, progressive=progressive)
    assert decoders.jpeg_frame_marker(data) == (0xC2 if progressive else 0xC0)
    for bad in (b"", data[:2], data[:20], b"\x89PNG" + data[4:]):
        assert decoders.jpeg_frame_marker(bad) is None
