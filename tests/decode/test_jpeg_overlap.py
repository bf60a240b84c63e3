"""A JPEG decoded while the native core resizes the rows decoded so far, against transformers.

Pipeline.run with jpeg=, csrc/row_gate.hpp. The output is transformers' on Pillow's decode, bit for
bit, on one thread and on two, through the overlapped path (asserted); broken data ends where
Pillow's decode ends; a second caller meanwhile changes nothing."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from PIL import Image
from support.decode_common import reference
from support.hf_oracle import hf_call
from support.images import encode
from support.outputs import assert_arrays_equal

import smg_fast
from smg_fast import _native
from smg_fast.errors import InvalidImageError
from smg_fast.imaging import decoders

WHOLE, DECLINED, FAILED = decoders.JPEG_WHOLE, decoders.JPEG_DECLINED, decoders.JPEG_FAILED

pytestmark = pytest.mark.usefixtures("libjpeg_bound")


def pillow_rgb(data: bytes) -> np.ndarray:
    return reference(data, hf=False)  # Pillow's decode, convert("RGB")


KINDS = {"420": {"subsampling": "4:2:0"}, "444-progressive": {"subsampling": "4:4:4",
                                                               "progressive": True},
         "grey": {"grey": True}}


def make(photo: Image.Image, size: tuple[int, int], kind: str) -> bytes:
    kw = dict(KINDS[kind])
    img = photo.resize(size)
    if kw.pop("grey", False):
        img = img.convert("L")
    return encode(img, "JPEG", quality=90, **kw)


# max_pixels: the family's default (a mild upscale to the patch grid), and downscales by 30x and
# 180x whose block rows read ~150 and ~330 source rows each: the resize keeps catching up with
# the decoder and waiting for rows.
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("size,max_pixels", [((1920, 1080), None), ((1920, 1080), 256 * 256),
                                             ((4000, 3000), 256 * 256),
                                             ((331, 1207), None), ((57, 29), None)])
def test_qwen_equals_transformers(photo, hf_qwen, ours, thread_count, overlapped, kind, size,
                                  max_pixels):
    data = make(photo, size, kind)
    over = {} if max_pixels is None else {"max_pixels": max_pixels}
    want, grid = hf_call(hf_qwen("qwen2_vl", **over), [Image.open(io.BytesIO(data))])
    got = ours("qwen2_vl", **over)(data)
    assert overlapped == [True]
    assert_arrays_equal(got["pixel_values"], want)
    assert np.array_equal(got["image_grid_thw"], grid)


# The other resamplers and layouts the overlap must wait correctly for: torch's antialiased
# bicubic (torchvision backend), Kimi (no resize below its limit: the copy mode; a resize past
# it), Qwen3-VL (patch 16). Each against the same processor on Pillow's decoded pixels, whose
# parity with the references is the subject of test_torchvision_backend / test_kimi / test_parity.
@pytest.mark.parametrize("name,kw", [("qwen2_vl", {"backend": "torchvision"}),
                                     ("kimi_k25", {}), ("qwen3_vl", {})])
@pytest.mark.parametrize("size", [(1920, 1080), (4000, 3000), (640, 427)])
def test_other_families_equal_their_array_path(photo, ours, thread_count, overlapped, name, kw,
                                               size):
    data = make(photo, size, "420")
    proc = ours(name, **kw)
    got = proc(data)["pixel_values"]
    assert overlapped == [True]
    assert_arrays_equal(got, proc(pillow_rgb(data))["pixel_values"])


@pytest.mark.parametrize("cut", [0.05, 0.5, 0.97])
def test_truncated_fails_as_pillow_does(photo, ours, thread_count, overlapped, cut):
    data = make(photo, (1920, 1080), "420")
    broken = data[: int(len(data) * cut)]
    with pytest.raises(OSError):
        pillow_rgb(broken)
    with pytest.raises(InvalidImageError):
        ours("qwen2_vl")(broken)
    assert overlapped == [False]  # the overlapped decode failed; Pillow then refused


def test_corrupt_data_gives_pillows_pixels_or_its_error(photo, ours, hf_qwen, thread_count,
                                                        overlapped):
    """Flipped entropy bytes.

    Libjpeg warns, the overlapped output is dropped and Pillow decides (here it decodes the damage:
    the output is transformers' on those pixels)."""
    data = bytearray(make(photo, (1920, 1080), "420"))
    start = data.rindex(b"\xff\xda")
    for k in range(4):
        data[start + 20 + (len(data) - start) // 3 + k * 37] ^= 0x5A
    data = bytes(data)
    want, _ = hf_call(hf_qwen("qwen2_vl"), [Image.open(io.BytesIO(data))])
    got = ours("qwen2_vl")(data)["pixel_values"]
    assert overlapped == [False]
    assert_arrays_equal(got, want)


def test_what_it_does_not_take_goes_the_old_way(photo, ours, tmp_path, overlapped, monkeypatch):
    """CMYK (Pillow's), an EXIF rotation, a batch and the simplejpeg engine never try it."""
    proc = ours("qwen2_vl")
    cmyk = encode(photo.convert("CMYK"), "JPEG", quality=90)
    assert_arrays_equal(proc(cmyk)["pixel_values"], proc(pillow_rgb(cmyk))["pixel_values"])
    exif = photo.getexif()
    exif[0x0112] = 6
    rotated = encode(photo, "JPEG", quality=90, exif=exif.tobytes())
    plain = make(photo, (640, 427), "420")
    proc(rotated)
    proc([plain, plain])
    assert overlapped == []
    for planned in (proc.plan_batch(cmyk), proc.plan_batch(rotated), proc.plan_batch([plain] * 2)):
        assert not planned.decodes_while_computing  # what the server decides by
        planned.close()
    monkeypatch.setattr(decoders, "_jpeg_engine", decoders.SIMPLEJPEG)
    assert not proc.plan_batch(plain).decodes_while_computing
    assert_arrays_equal(proc(plain)["pixel_values"], proc(pillow_rgb(plain))["pixel_values"])
    assert overlapped == []


def test_native_run_with_jpeg(photo):
    proc = smg_fast.load_processor("qwen2_vl")
    pipe = proc.pipeline("float32")
    data = make(photo, (640, 427), "420")
    pl = proc.plan(640, 427, 0)
    args = (pl.resize_w, pl.resize_h, pl.grid_h, pl.grid_w)
    want = np.zeros(pipe.output_elems(*args), np.float32)
    pipe.run(pillow_rgb(data), *args, want)
    got = np.full_like(want, np.nan)
    src = np.zeros((427, 640, 3), np.uint8)
    rgb = _native.PixelFormat.RGB
    assert pipe.run(src, *args, got, fmt=rgb, jpeg=data) == WHOLE
    assert np.array_equal(got, want) and np.array_equal(src, pillow_rgb(data))
    cmyk = encode(photo.convert("CMYK"), "JPEG", quality=90)
    assert pipe.run(src, *args, got, fmt=rgb, jpeg=cmyk) == DECLINED
    assert pipe.run(src, *args, got, fmt=rgb, jpeg=data[: len(data) // 2]) == FAILED
    assert pipe.run(src[:, :320], *args, got, fmt=rgb, jpeg=data) == DECLINED  # not its size
    for bad in ({"fmt": None}, {"fmt": _native.PixelFormat.RGBX}):
        with pytest.raises(ValueError):
            pipe.run(src, *args, got, jpeg=data, **bad)
    frozen = src.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        pipe.run(frozen, *args, got, fmt=rgb, jpeg=data)
    with pytest.raises(ValueError):
        pipe.run(src, *args, got, fmt=rgb, jpeg=np.frombuffer(data, np.uint8)[::2])
    took = np.full(1, -1.0)
    assert pipe.run(src, *args, got, fmt=rgb, jpeg=data, decode_seconds=took) == WHOLE
    assert 0 < took[0] < 60
    read_only = took.copy()
    read_only.flags.writeable = False
    for bad in (np.zeros(1, np.float32), np.zeros(1, ">f8"), np.zeros(0), read_only):
        with pytest.raises(ValueError):
            pipe.run(src, *args, got, fmt=rgb, jpeg=data, decode_seconds=bad)
    with pytest.raises(ValueError):  # a time only for a decode
        pipe.run(src, *args, got, fmt=rgb, decode_seconds=took)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_planned_batch_writes_into_a_callers_buffer(photo, ours, hf_qwen, overlapped, dtype):
    """PlannedBatch.write_into (the server's way to a leased destination).

    The overlapped decode straight into the caller's buffer, its decode time noted; a destination
    that cannot hold the output is refused before anything is decoded."""
    data = make(photo, (1280, 720), "420")
    proc = ours("qwen2_vl")
    closed = proc.plan_batch(data, dtype)
    assert closed.decodes_while_computing
    closed.close()
    assert not closed.decodes_while_computing  # a closed header decodes nothing
    planned = proc.plan_batch(data, dtype)
    room = np.full(planned.nbytes // planned.np_dtype.itemsize + 5, 7, planned.np_dtype)
    got = planned.write_into(room)
    assert overlapped == [True] and planned.decode_seconds > 0
    assert got.shape == planned.shape and np.shares_memory(got, room)
    assert np.array_equal(got, proc(data, dtype=dtype)["pixel_values"])
    assert np.all(room[got.size:] == 7)  # nothing past the output
    if dtype == "float32":
        assert_arrays_equal(got, hf_call(hf_qwen("qwen2_vl"), [Image.open(io.BytesIO(data))])[0])
    with pytest.raises(RuntimeError):  # consumed by its write
        planned.write_into(room)
    tried = len(overlapped)
    for bad in (room[:-6], room.astype(np.float64), room[::2]):
        again = proc.plan_batch(data, dtype)
        with pytest.raises(ValueError):
            again.write_into(bad)
    assert len(overlapped) == tried  # the refused writes decoded nothing


def test_concurrent_callers(photo, hf_qwen, ours, thread_count):
    """Four callers at once (one holds the pool, the others decode and compute on their own thread).

    Each gets its own image's result."""
    datas = [make(photo, size, "420") for size in ((1920, 1080), (1280, 720), (900, 1600),
                                                   (640, 427))]
    wants = [hf_call(hf_qwen("qwen2_vl"), [Image.open(io.BytesIO(d))])[0] for d in datas]
    proc = ours("qwen2_vl")
    errors: list = []

    def caller(k: int) -> None:
        try:
            for _ in range(3):
                assert np.array_equal(proc(datas[k])["pixel_values"], wants[k])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors, errors


F, P, R = _native.Filter, _native.PassOrder, _native.Resampler
RESAMPLERS = [(f, R.PILLOW) for f in (F.NEAREST, F.BOX, F.BILINEAR, F.HAMMING, F.BICUBIC,
                                      F.LANCZOS)] + [(F.BICUBIC, R.TORCH)]


@pytest.mark.parametrize("filt,rs", RESAMPLERS, ids=lambda v: v.name)
@pytest.mark.parametrize("order", [P.HORIZONTAL_FIRST, P.PILLOW13], ids=lambda v: v.name)
@pytest.mark.parametrize("src,out", [((64, 48), (64, 48)), ((64, 48), (30, 48)),
                                     ((64, 48), (64, 17)), ((64, 48), (100, 131)),
                                     ((300, 200), (280, 31)), ((50, 400), (47, 13)),
                                     ((40, 301), (41, 300)), ((9, 700), (20, 6))])
def test_rows_read_bound_what_the_resize_reads(filt, rs, order, src, out):
    """resize_rows_read(y1) bounds the source rows that output rows [0, y1) read.

    The overlap waits for that many decoded rows before computing those output rows: garbage in
    every row from there on must leave them as they were (a bound one row short fails here
    deterministically, where a race would rarely show it)."""
    rnd = np.random.default_rng(sum(src) * 7 + sum(out))
    img = rnd.integers(0, 256, (src[1], src[0], 3), dtype=np.uint8)
    full = _native.resize(img, *out, filt, order, rs)
    ends = []
    for y1 in sorted({1, 2, out[1] // 3, out[1] // 2, out[1] - 1, out[1]} - {0}):
        n = _native.resize_rows_read(img, *out, filt, order, rs, y1)
        assert 1 <= n <= src[1]
        ends.append(n)
        if n < src[1]:
            spoiled = img.copy()
            spoiled[n:] = rnd.integers(0, 256, spoiled[n:].shape, dtype=np.uint8)
            assert np.array_equal(_native.resize(spoiled, *out, filt, order, rs)[:y1], full[:y1])
    assert ends == sorted(ends)
