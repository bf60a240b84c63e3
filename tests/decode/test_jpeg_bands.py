"""The native JPEG decoder (csrc/decode/jpeg.cpp), which drives the libjpeg Pillow itself loaded.

Banded decoding on two threads gives Pillow's pixels for every subsampling and wherever the cut
falls; broken data is reported, never returned as pixels; binding refuses what it must."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image
from support.decode_common import reference
from support.images import encode

import smg_fast
from smg_fast import _native
from smg_fast.imaging import decoders

WHOLE, BANDED, DECLINED, FAILED = (decoders.JPEG_WHOLE, decoders.JPEG_BANDED,
                                   decoders.JPEG_DECLINED, decoders.JPEG_FAILED)
NEVER, IDLE, ALWAYS = (decoders.JPEG_BANDS_NEVER, decoders.JPEG_BANDS_IDLE,
                       decoders.JPEG_BANDS_ALWAYS)

pytestmark = pytest.mark.usefixtures("libjpeg_bound")


def pillow(data: bytes) -> np.ndarray:
    return reference(data, hf=False)  # Pillow's decode, convert("RGB")


def native(data: bytes, bands: int = ALWAYS) -> tuple[int, np.ndarray]:
    import io

    with Image.open(io.BytesIO(data)) as im:
        w, h = im.size
    out = np.full((h, w, 3), 77, np.uint8)
    return _native.jpeg_decode(data, out, bands), out


@contextlib.contextmanager
def pipelines_elsewhere(photo: Image.Image) -> Iterator[None]:
    """Another thread runs pipelines (native work, nearly all of its time) until the block ends."""
    proc = smg_fast.load_processor("qwen2_vl")
    image = np.asarray(photo.resize((3000, 2000)))
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            proc(image)

    t = threading.Thread(target=busy)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


SUBSAMPLINGS = {"444": {"subsampling": "4:4:4"}, "422": {"subsampling": "4:2:2"},
                "420": {"subsampling": "4:2:0"}, "grey": {"grey": True}}


@pytest.mark.parametrize("sub", list(SUBSAMPLINGS))
@pytest.mark.parametrize("size", [(64, 16), (33, 17), (640, 32), (31, 33), (640, 256),
                                  (333, 257), (97, 271), (640, 272), (641, 273), (17, 300),
                                  (640, 427), (1920, 1080)])
def test_bands_equal_pillow(photo, threads, sub, size):
    """The lower band restarts one iMCU row (8 or 16 rows) above the cut.

    Each size puts the cut (13/20 of the height, rounded down to whole iMCU rows, at least one)
    somewhere else, down to images of two iMCU rows."""
    threads(2)
    kw = dict(SUBSAMPLINGS[sub])
    img = photo.resize(size)
    if kw.pop("grey", False):
        img = img.convert("L")
    data = encode(img, "JPEG", quality=90, **kw)
    status, got = native(data)
    imcu = 16 if sub == "420" else 8
    assert status == (BANDED if size[1] >= 2 * imcu else WHOLE)
    assert np.array_equal(got, pillow(data))


@pytest.mark.parametrize("sub", ["440", "411"])
def test_bands_uncommon_subsamplings(photo, threads, sub):
    import simplejpeg

    threads(2)
    for h in (256, 300, 427):
        arr = np.ascontiguousarray(np.asarray(photo.resize((320, h))))
        data = simplejpeg.encode_jpeg(arr, quality=88, colorsubsampling=sub)
        status, got = native(data)
        assert status == BANDED and np.array_equal(got, pillow(data))


def test_bands_vertical_factor_4(photo, threads, tmp_path):
    """Bands hold for iMCU rows of 32 pixel rows (luma sampled 1x4 or 2x4).

    The JPEGs are made by libjpeg-turbo's cjpeg (Debian's libjpeg-turbo-progs, which
    .ci/test_tools.sh installs)."""
    import shutil

    cjpeg = shutil.which("cjpeg")
    assert cjpeg, "cjpeg missing: run .ci/test_tools.sh (libjpeg-turbo-progs)"
    threads(2)
    for size in ((97, 64), (320, 300), (641, 427)):
        ppm = tmp_path / "in.ppm"
        photo.resize(size).save(ppm)
        for sample in ("1x4,1x1,1x1", "2x4,1x1,1x1", "1x4,1x2,1x1"):
            data = subprocess.run([cjpeg, "-quality", "90", "-sample", sample, str(ppm)],
                                  capture_output=True, check=True).stdout
            status, got = native(data)
            assert status == BANDED, (size, sample)
            assert np.array_equal(got, pillow(data)), (size, sample)


def test_bands_with_restart_markers(photo, threads):
    threads(2)
    for blocks in (1, 3):
        data = encode(photo, "JPEG", quality=90, restart_marker_blocks=blocks)
        status, got = native(data)
        assert status == BANDED and np.array_equal(got, pillow(data))


def test_when_idle_bands_only_large_images_on_two_threads(photo, threads):
    big = encode(photo.resize((1024, 512)), "JPEG", quality=90)
    threads(1)
    assert native(big, IDLE)[0] == WHOLE
    status, got = native(big, ALWAYS)  # the two bands one after the other, on this thread
    assert status == BANDED and np.array_equal(got, pillow(big))
    threads(2)
    assert native(big, IDLE)[0] == BANDED
    assert native(big, NEVER)[0] == WHOLE
    for d in (encode(photo.resize((1100, 255)), "JPEG", quality=90),  # too few rows
              encode(photo.resize((511, 512)), "JPEG", quality=90),   # too few pixels
              encode(photo.resize((1024, 512)), "JPEG", quality=90, progressive=True)):
        status, got = native(d, IDLE)
        assert status == WHOLE and np.array_equal(got, pillow(d))
    prog = encode(photo, "JPEG", quality=90, progressive=True)
    assert native(prog, ALWAYS)[0] == WHOLE  # multi-scan: never banded


def test_when_idle_means_no_other_native_work(photo, threads):
    """"Band only when idle" means no other native call is in flight, whatever the pool does.

    While another thread decodes JPEGs whole (native work that leaves the pool free), a decode
    that may band only when idle decodes whole: the count of calls in flight decides."""
    threads(2)
    big = encode(photo.resize((1024, 512)), "JPEG", quality=90)
    other = encode(photo.resize((2048, 1536)), "JPEG", quality=90)
    out = np.empty((1536, 2048, 3), np.uint8)
    stop, started = threading.Event(), threading.Event()

    def busy() -> None:  # back-to-back native calls: gaps of microseconds between them
        while not stop.is_set():
            _native.jpeg_decode(other, out, NEVER)
            started.set()

    t = threading.Thread(target=busy)
    t.start()
    try:
        assert started.wait(30)
        statuses = [native(big, IDLE)[0] for _ in range(40)]
    finally:
        stop.set()
        t.join()
    assert set(statuses) <= {WHOLE, BANDED}
    assert statuses.count(WHOLE) >= 30, statuses  # bands only in the other's brief gaps


def test_batch_decode_threads_never_band(photo, threads, monkeypatch):
    """The images of one call decode side by side on the decode pool.

    Whole, never in bands; a single image decoded ahead of its native work (prepare()) decodes in
    the caller's thread and may band; a single image in a plain call overlaps its decode with its
    resize instead (test_jpeg_overlap)."""
    threads(2)
    assert decoders.available()[decoders.LIBJPEG_TURBO]  # the self-check done before recording
    seen: list[int] = []
    real = _native.jpeg_decode

    def recording(data, out, bands):
        seen.append(bands)
        return real(data, out, bands)

    monkeypatch.setattr(_native, "jpeg_decode", recording)
    proc = smg_fast.load_processor("qwen2_vl")
    a, b = (encode(photo.resize((1024, 768)).rotate(r), "JPEG", quality=90) for r in (0, 5))
    proc([a, b])
    assert seen == [NEVER, NEVER]
    seen.clear()
    proc.prepare(a, "float32").compute()
    assert seen == [IDLE]
    seen.clear()
    proc(a)
    assert seen == []


@pytest.mark.parametrize("cut", [0.2, 0.5, 0.8, 0.99])
def test_truncation_in_either_band_fails(photo, threads, cut):
    threads(2)
    data = encode(photo, "JPEG", quality=90)
    assert native(data[: int(len(data) * cut)])[0] == FAILED


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_corruption_in_either_band(photo, threads, where):
    """A flipped entropy byte.

    Libjpeg warns (FAILED, Pillow decides), or, where the damage still decodes, gives exactly what
    Pillow's (same) libjpeg gives."""
    threads(2)
    data = bytearray(encode(photo, "JPEG", quality=90))
    start = data.rindex(b"\xff\xda")
    for k in range(4):
        data[start + 20 + int((len(data) - start - 40) * where) + k * 37] ^= 0x5A
    status, got = native(bytes(data))
    assert status in (FAILED, BANDED)
    if status == BANDED:
        assert np.array_equal(got, pillow(bytes(data)))


def test_declines_what_it_does_not_take(photo):
    data = encode(photo, "JPEG", quality=90)
    assert native(encode(photo.convert("CMYK"), "JPEG", quality=90))[0] == DECLINED
    assert _native.jpeg_decode(data, np.empty((427, 641, 3), np.uint8), IDLE) == DECLINED
    assert _native.jpeg_decode(data, np.empty((426, 640, 3), np.uint8), IDLE) == DECLINED
    assert _native.jpeg_decode(b"not a jpeg", np.empty((1, 1, 3), np.uint8), IDLE) == FAILED
    assert _native.jpeg_decode(b"", np.empty((1, 1, 3), np.uint8), IDLE) == FAILED
    lossless = __import__("imagecodecs").jpeg8_encode(np.asarray(photo), lossless=True)
    assert native(lossless, ALWAYS)[0] == FAILED  # cannot skip rows: why bands need SOF0/1
    status, got = native(lossless, NEVER)
    assert status == WHOLE and np.array_equal(got, pillow(lossless))


def test_bad_arguments_raise(photo):
    data = encode(photo, "JPEG", quality=90)
    with pytest.raises(ValueError):
        _native.jpeg_decode(data, np.empty((427, 640, 4), np.uint8), IDLE)
    with pytest.raises(ValueError):
        _native.jpeg_decode(data, np.empty((427, 640 * 3), np.uint8), IDLE)
    ro = np.empty((427, 640, 3), np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        _native.jpeg_decode(data, ro, IDLE)
    with pytest.raises(ValueError):  # not packed: every other column
        _native.jpeg_decode(data, np.empty((427, 1280, 3), np.uint8)[:, ::2], IDLE)
    with pytest.raises(TypeError):
        _native.jpeg_decode(data, np.empty((427, 640, 3), np.float32), IDLE)
    with pytest.raises(TypeError):
        _native.jpeg_decode("text", np.empty((427, 640, 3), np.uint8), IDLE)
    for bad in (-1, 3):
        with pytest.raises(ValueError):
            _native.jpeg_decode(data, np.empty((427, 640, 3), np.uint8), bad)


def test_strided_rows(photo, threads):
    threads(2)
    data = encode(photo, "JPEG", quality=90)
    big = np.zeros((427, 700, 3), np.uint8)
    assert _native.jpeg_decode(data, big[:, 30:670], ALWAYS) == BANDED
    assert np.array_equal(big[:, 30:670], pillow(data))
    assert not big[:, :30].any() and not big[:, 670:].any()


def test_concurrent_callers(photo, threads):
    """Several Python threads share the one native pool: whoever finds it busy decodes whole."""
    threads(2)
    datas = [encode(photo.rotate(3 * i), "JPEG", quality=85 + i) for i in range(6)]
    wants = [pillow(d) for d in datas]
    bad: list[int] = []

    def run(i: int) -> None:
        for _ in range(5):
            status, got = native(datas[i], IDLE)
            if status not in (WHOLE, BANDED) or not np.array_equal(got, wants[i]):
                bad.append(i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(datas))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


BIND_SCRIPT = """
import ctypes.util, glob, os, sys
import numpy as np
from smg_fast import _native
out = np.empty((1, 1, 3), np.uint8)
print(_native.jpeg_decode(b"\\xff\\xd8", out, 2))               # unbound: declined
print(_native.jpeg_bind("/nonexistent/libjpeg.so.62"))
libc = [l.split()[-1] for l in open("/proc/self/maps") if "/libc.so" in l or "/libc-" in l][0]
print(_native.jpeg_bind(libc))
import imagecodecs, imagecodecs._jpeg8                        # loads a libjpeg.so.8 (ABI 80)
so8 = [l.split()[-1] for l in open("/proc/self/maps") if "libjpeg-" in l and ".so.8" in l][0]
print(_native.jpeg_bind(so8))
print(_native.jpeg_decode(b"\\xff\\xd8", out, 2))               # still unbound
"""


def test_binding_refuses_the_wrong_library():
    res = subprocess.run([sys.executable, "-c", BIND_SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str(DECLINED)
    assert lines[1].startswith("not loaded in this process")
    assert lines[2].startswith("a libjpeg entry point is missing")
    assert "does not take this build's ABI" in lines[3]
    assert lines[4] == str(DECLINED)


def test_fork_during_native_work_keeps_bands(photo, threads):
    """A child forked during another thread's native work does not inherit that call's count.

    With it, the child would never band again. Five forks, each likely inside a run (the busy
    thread spends nearly all its time in native code)."""
    import os
    import signal
    import time

    threads(2)
    big = encode(photo.resize((1024, 512)), "JPEG", quality=90)
    codes = []
    with pipelines_elsewhere(photo):
        for _ in range(5):
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:  # the child: threads again, then one decode that may band
                code = 1
                try:
                    signal.alarm(30)  # never hang the suite
                    smg_fast.set_num_threads(2)
                    code = 0 if native(big, IDLE)[0] == BANDED else 2
                finally:
                    os._exit(code)
            codes.append(os.waitpid(pid, 0)[1])
    assert [os.WEXITSTATUS(c) if os.WIFEXITED(c) else -1 for c in codes] == [0] * 5


def test_self_check_covers_the_bands(photo, monkeypatch, caplog):
    """The once-per-process check against Pillow switches off a library whose bands go wrong.

    Its row skipping went wrong, so only banded decodes differ."""
    monkeypatch.setattr(decoders, "_checked", {})  # as in a fresh process
    real = _native.jpeg_decode

    def bands_off_by_one(data, out, bands):
        status = real(data, out, bands)
        if status == BANDED:
            out[-1, -1, 0] ^= 1
        return status

    monkeypatch.setattr(_native, "jpeg_decode", bands_off_by_one)
    assert not decoders.available()[decoders.LIBJPEG_TURBO]
    assert "does not reproduce Pillow's pixels" in caplog.text
