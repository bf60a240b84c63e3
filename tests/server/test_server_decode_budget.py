"""The decode budget: decoded images held at once across requests, planned from their headers.

Large images that scale down to small outputs pass --max-output-mb and admission; each item's
decode memory is planned from its header and taken from --max-decode-mb around its own decode
(a pixel cache hit takes none), in order of arrival: an item without room waits its turn, up to
--decode-wait-s, then its request is refused RESOURCE_EXHAUSTED. The plan is checked against
what decoding really takes (the process's peak RSS), for every decoder and format.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib

import numpy as np
import pytest
from PIL import Image
from support.images import encode

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast.client import Client, build_request  # noqa: E402
from smg_fast.imaging.decode_memory import (  # noqa: E402
    DECODER_STATE_BYTES,
    PILLOW_EXTRA_COPIES,
    PIXEL_BYTES,
    WEBP_EXTRA_COPIES,
)
from smg_fast.server.decode_budget import DecodeBudget  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")

SMALL_PX = 20_000  # the outputs stay tiny: what is large is the decode
W, H = 4000, 3000  # 48 MB planned per copy (4 bytes a pixel)
BUDGET_MB = 64  # one such image at a time


@pytest.fixture(scope="module")
def big_jpeg(real_images) -> bytes:
    """A real photo scaled up to 4000x3000, baseline JPEG, no EXIF."""
    return encode(real_images.rgb("rocket").resize((W, H), Image.Resampling.BICUBIC), "JPEG",
                  quality=85)


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory, big_jpeg):
    d = tmp_path_factory.mktemp("decode_media")
    (d / "big.jpg").write_bytes(big_jpeg)
    return d


@pytest.fixture(scope="module")
def want_big(big_jpeg, hf_qwen):
    """transformers' Qwen2-VL (PIL) pixel_values of the big JPEG, max_pixels=SMALL_PX."""
    from support.hf_oracle import hf_call

    with Image.open(io.BytesIO(big_jpeg)) as im:
        rgb = im.convert("RGB")
    return hf_call(hf_qwen("qwen2_vl", max_pixels=SMALL_PX), [rgb])[0]


def _wait(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def planned_big(big_jpeg: bytes, copies: int = 1) -> int:
    return copies * W * H * PIXEL_BYTES + len(big_jpeg) + DECODER_STATE_BYTES


def test_planned_decode_memory_from_headers(smg, big_jpeg, real_images):
    """A request's planned decode memory is known from its headers, before decoding."""
    proc = smg.load_processor("qwen2_vl", max_pixels=SMALL_PX)
    with proc.plan_batch(big_jpeg) as planned:  # read as decoded: one copy
        assert planned.decode_bytes == planned_big(big_jpeg)
    exif = Image.Exif()
    exif[0x0112] = 6  # turned by exif_transpose: its copy too
    turned = encode(Image.open(io.BytesIO(big_jpeg)), "JPEG", quality=85, exif=exif.tobytes())
    with proc.plan_batch(turned) as planned:
        assert planned.decode_bytes == planned_big(turned, 2)
    keyed = real_images.rgb("chelsea").convert("P", palette=Image.Palette.ADAPTIVE)
    png = encode(keyed, "PNG", transparency=0)  # Pillow decodes it, composited onto white
    with proc.plan_batch([png, big_jpeg]) as planned:  # a batch holds all its images
        assert planned.decode_bytes == ((6 + PILLOW_EXTRA_COPIES) * keyed.width * keyed.height
                                        * PIXEL_BYTES + len(png) + DECODER_STATE_BYTES
                                        + planned_big(big_jpeg))
    webp = encode(real_images.rgb("chelsea"), "WEBP")  # Pillow's animation decoder
    with proc.plan_batch(webp) as planned:
        assert planned.decode_bytes == ((1 + WEBP_EXTRA_COPIES) * keyed.width * keyed.height
                                        * PIXEL_BYTES + len(webp) + DECODER_STATE_BYTES)


_MEASURE = textwrap.dedent("""
    import json, sys
    import smg_fast
    from smg_fast.imaging.sample import sample_image_bytes

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    proc = smg_fast.load_processor("qwen2_vl", max_pixels=20000)
    data = open(sys.argv[1], "rb").read()
    proc(sample_image_bytes(96, 64, "PNG"))  # tables and code paged in, not the big buffers
    planned = proc.plan_batch(data)
    before = hwm()
    batch = planned.decode()
    pixels = batch.pixels[0].array
    print(json.dumps({"planned": planned.decode_bytes, "grew": hwm() - before,
                      "held": int(pixels.nbytes)}))
""")


def _png16(arr: np.ndarray) -> bytes:
    """A 16-bit PNG (RGB or RGBA, from arr's uint16 samples), which Pillow cannot write."""
    h, w, c = arr.shape
    rows = b"".join(b"\0" + arr[r].astype(">u2").tobytes() for r in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", w, h, 16, {3: 2, 4: 6}[c], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 1))
            + chunk(b"IEND", b""))


def _peak_input(kind: str, photo: Image.Image, big_jpeg: bytes) -> bytes:
    """The image of one kind the real-peak test decodes (W x H)."""
    if kind == "jpeg":
        return big_jpeg
    if kind == "jpeg_turned":
        exif = Image.Exif()
        exif[0x0112] = 8
        return encode(Image.open(io.BytesIO(big_jpeg)), "JPEG", quality=85, exif=exif.tobytes())
    if kind == "jpeg_progressive":
        return encode(photo, "JPEG", quality=95, subsampling=0, progressive=True)
    if kind in ("jpeg_cmyk", "jpeg_cmyk_progressive"):
        return encode(photo.convert("CMYK"), "JPEG", quality=90,
                      progressive=kind.endswith("progressive"))
    if kind == "png_keyed":
        return encode(photo.convert("P", palette=Image.Palette.ADAPTIVE), "PNG", transparency=3,
                      compress_level=1)
    if kind == "png_rgb":
        return encode(photo, "PNG", compress_level=1)
    rgba = photo.convert("RGBA")
    rgba.putalpha(128)
    if kind == "png_rgba":
        return encode(rgba, "PNG", compress_level=1)
    if kind == "png_la":
        return encode(rgba.convert("LA"), "PNG", compress_level=1)
    if kind == "png16_rgb":
        return _png16(np.asarray(photo).astype(np.uint16) * 257)
    if kind == "png16_rgba":
        return _png16(np.asarray(rgba).astype(np.uint16) * 257)
    if kind == "png_i16":
        return encode(Image.fromarray(np.asarray(photo.convert("L")).astype(np.uint16) * 257),
                      "PNG", compress_level=1)
    if kind == "webp":
        return encode(photo, "WEBP", quality=80)
    if kind == "webp_alpha":
        return encode(rgba, "WEBP", quality=80)
    if kind == "webp_animated":
        return encode(photo, "WEBP", quality=50, save_all=True, duration=100,
                      append_images=[photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT)])
    if kind == "gif":
        return encode(photo.convert("P"), "GIF")
    if kind == "gif_animated":
        frames = photo.convert("P")
        return encode(frames, "GIF", save_all=True,
                      append_images=[frames.transpose(Image.Transpose.FLIP_LEFT_RIGHT)])
    if kind == "bmp":
        return encode(photo, "BMP")
    if kind == "tiff_jpeg":
        return encode(photo, "TIFF", compression="jpeg")
    if kind == "tiff_lzw_rgba":
        return encode(rgba, "TIFF", compression="tiff_lzw")
    assert kind == "tiff_float"
    return encode(Image.fromarray(np.asarray(photo.convert("L")).astype(np.float32), "F"), "TIFF")


PEAK_KINDS = ["jpeg", "jpeg_turned", "jpeg_progressive", "jpeg_cmyk", "jpeg_cmyk_progressive",
              "png_keyed", "png_rgb", "png_rgba", "png_la", "png16_rgb", "png16_rgba", "png_i16",
              "webp", "webp_alpha", "webp_animated", "gif", "gif_animated", "bmp", "tiff_jpeg",
              "tiff_lzw_rgba", "tiff_float"]


@pytest.mark.parametrize("kind", PEAK_KINDS)
def test_planned_decode_memory_bounds_the_real_peak(tmp_path, real_images, big_jpeg, kind):
    """Decoding takes no more than planned: the peak RSS of a fresh process grows by at most it.

    Every decoder and mode the server reads: the native JPEG and PNG decoders, and Pillow's
    (which decodes WebP through its animation decoder, 16-bit PNGs and CMYK through wider
    buffers, a progressive JPEG through a coefficient buffer of the whole image)."""
    photo = real_images.rgb("rocket").resize((W, H), Image.Resampling.BICUBIC)
    data = _peak_input(kind, photo, big_jpeg)
    path = tmp_path / "image.bin"
    path.write_bytes(data)
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True,
                         text=True, timeout=300, check=True)
    got = json.loads(out.stdout)
    assert got["held"] <= got["planned"]
    assert got["grew"] <= got["planned"], got


def test_a_large_item_decodes_between_another_requests_items(start_server, media_dir,
                                                             big_jpeg, small_jpegs, want_big,
                                                             ours):
    """The budget is held per item around its decode, not for a whole request.

    A request of 200 large images holds one image's share at a time: another large image waits
    for the next turn (in order) and is served, exactly, while the long request still runs."""
    srv = start_server(workers=2, allowed_media_dirs=[str(media_dir)], max_decode_mb=BUDGET_MB,
                       pixel_cache_mb=0)
    budget = srv.server.decode
    assert budget.max_bytes == BUDGET_MB << 20
    heavy = build_request([f"file://{media_dir}/big.jpg"] * 200, transport="inline",
                          max_pixels=SMALL_PX)
    with Client(srv.target, timeout=120) as c:
        first = c._stub.Preprocess.future(heavy, timeout=300)
        try:
            _wait(lambda: budget.stats()["holders"] == 1)
            assert budget.stats()["bytes"] == planned_big(big_jpeg)
            small = small_jpegs["flower"]  # fits the room left: served at once
            out = c.preprocess(small, transport="inline", max_pixels=SMALL_PX)
            assert np.array_equal(out.pixel_values,
                                  ours("qwen2_vl", max_pixels=SMALL_PX)(small)["pixel_values"])
            out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
            assert np.array_equal(out.pixel_values, want_big)
            assert not first.done()  # served between the long request's items
            assert budget.stats()["waited"] >= 1
        finally:
            first.cancel()
        _wait(lambda: budget.stats()["holders"] == 0 and not srv.server.work_pending)
    stats = budget.stats()
    assert stats["bytes"] == 0 and stats["rejected"] == 0
    assert stats["peak_bytes"] <= BUDGET_MB << 20


def test_an_item_kept_out_of_room_is_refused_after_its_wait(start_server, big_jpeg, want_big):
    """Past --decode-wait-s without room, RESOURCE_EXHAUSTED naming both flags; served later."""
    srv = start_server(max_decode_mb=BUDGET_MB, decode_wait_s=0.5, pixel_cache_mb=0)
    budget = srv.server.decode
    assert budget.take(budget.max_bytes)  # another item decoding, taking all of it
    try:
        with Client(srv.target, timeout=120) as c:
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as err:
                c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
            assert time.monotonic() - t0 >= 0.5
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            details = err.value.details()
            assert "--max-decode-mb" in details and "--decode-wait-s" in details
            assert "retry with backoff" in details
            budget.give(budget.max_bytes)
            out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
            assert np.array_equal(out.pixel_values, want_big)
    finally:
        if budget.stats()["holders"]:
            budget.give(budget.max_bytes)
    assert budget.stats()["rejected"] == 1 and budget.stats()["bytes"] == 0
    text = srv.server.metrics.registry.get_sample_value("smg_fast_decode_rejected_total")
    assert text == 1


def test_pixel_cache_hits_take_no_decode_budget(start_server, big_jpeg, want_big, small_jpegs):
    """Only a miss decodes: a hit is served while the budget has no room at all."""
    srv = start_server(max_decode_mb=BUDGET_MB, decode_wait_s=0.3, pixel_cache_mb=64)
    budget = srv.server.decode
    with Client(srv.target, timeout=120) as c:
        out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)  # a miss
        assert np.array_equal(out.pixel_values, want_big)
        assert budget.stats()["peak_bytes"] == planned_big(big_jpeg)
        assert budget.take(budget.max_bytes)
        try:
            out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)  # a hit
            assert np.array_equal(out.pixel_values, want_big)
            with pytest.raises(grpc.RpcError) as err:  # a miss must wait for room: refused
                c.preprocess(small_jpegs["china"], transport="inline", max_pixels=SMALL_PX)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            budget.give(budget.max_bytes)
    assert budget.stats()["rejected"] == 1 and budget.stats()["bytes"] == 0


def _taker(budget: DecodeBudget, nbytes: int, got: list, wait_s: float = 10.0):
    thread = threading.Thread(target=lambda: got.append((nbytes, budget.take(nbytes, wait_s))))
    thread.start()
    return thread


def test_takers_are_served_in_order_and_a_large_one_is_not_starved():
    budget = DecodeBudget(100, wait_s=10.0)
    assert budget.take(60)
    got: list = []
    large = _taker(budget, 50, got)  # does not fit: waits
    _wait(lambda: budget.stats()["waiting"] == 1)
    small = _taker(budget, 10, got)  # would fit, but arrived after the large one: waits too
    _wait(lambda: budget.stats()["waiting"] == 2)
    time.sleep(0.05)
    assert got == []
    budget.give(60)
    large.join(5)
    small.join(5)
    assert got == [(50, True), (10, True)]
    assert budget.stats()["bytes"] == 60 and budget.stats()["waited"] == 2


def test_an_item_larger_than_the_budget_waits_for_it_empty_and_holds_it_alone():
    budget = DecodeBudget(100, wait_s=10.0)
    assert budget.take(30)
    got: list = []
    huge = _taker(budget, 500, got)  # alone only: waits for the 30 to go
    _wait(lambda: budget.stats()["waiting"] == 1)
    budget.give(30)
    huge.join(5)
    assert got == [(500, True)] and budget.stats()["peak_bytes"] == 500
    assert not budget.take(10, 0.1)  # nothing else while it decodes...
    budget.give(500)
    assert budget.take(10, 0.1)  # ...and everything once it is done
    assert budget.stats()["rejected"] == 1


def test_a_taker_is_refused_after_its_wait_and_the_next_goes_on():
    budget = DecodeBudget(100, wait_s=10.0)
    assert budget.take(90)
    got: list = []
    t0 = time.monotonic()
    first = _taker(budget, 50, got, wait_s=0.2)
    _wait(lambda: budget.stats()["waiting"] == 1)
    second = _taker(budget, 10, got, wait_s=10.0)  # behind it until it gives up
    first.join(5)
    second.join(5)
    assert got == [(50, False), (10, True)] and time.monotonic() - t0 >= 0.2
    assert budget.stats()["rejected"] == 1


def test_lone_request_past_the_budget_is_served(start_server, big_jpeg, want_big):
    """One request needing more than the whole budget runs when nothing else decodes."""
    srv = start_server(max_decode_mb=16, pixel_cache_mb=0)
    with Client(srv.target, timeout=120) as c:
        out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
    assert np.array_equal(out.pixel_values, want_big)
    assert srv.server.decode.stats()["peak_bytes"] == planned_big(big_jpeg)
    assert srv.server.decode.stats()["bytes"] == 0


def test_automatic_budget_is_a_quarter_of_the_cgroup_limit_when_smaller(tmp_path):
    """A container's memory limit (cgroup v2 or v1) bounds the automatic budget, not only RAM."""
    from smg_fast.server.decode_budget import cgroup_memory_limit, decode_bytes_limit

    v2 = tmp_path / "v2"
    (v2 / "kubepods" / "pod1").mkdir(parents=True)
    (v2 / "kubepods" / "pod1" / "memory.max").write_text("2147483648\n")
    (v2 / "proc_cgroup").write_text("0::/kubepods/pod1\n")
    assert cgroup_memory_limit(str(v2 / "proc_cgroup"), str(v2)) == 2 << 30
    (v2 / "kubepods" / "pod1" / "memory.max").write_text("max\n")
    assert cgroup_memory_limit(str(v2 / "proc_cgroup"), str(v2)) is None
    (v2 / "memory.max").write_text("1073741824\n")  # its own namespace: the mount's root
    assert cgroup_memory_limit(str(v2 / "proc_cgroup"), str(v2)) == 1 << 30
    v1 = tmp_path / "v1"
    (v1 / "memory" / "docker" / "abc").mkdir(parents=True)
    (v1 / "memory" / "docker" / "abc" / "memory.limit_in_bytes").write_text("3221225472\n")
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # unlimited
    (v1 / "proc_cgroup").write_text("5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n")
    assert cgroup_memory_limit(str(v1 / "proc_cgroup"), str(v1)) == 3 << 30
    assert cgroup_memory_limit(str(tmp_path / "none"), str(tmp_path)) is None
    assert decode_bytes_limit(0, 2 << 30) == 512 << 20
    assert decode_bytes_limit(0, 1 << 30) == 256 << 20  # never under 256 MiB
    assert decode_bytes_limit(0, 1 << 50) == decode_bytes_limit(0, None)  # RAM is smaller
    assert decode_bytes_limit(64, 2 << 30) == 64 << 20  # an explicit budget is kept


def test_decode_budget_flag_and_env():
    from smg_fast.server.flags import build_parser, config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.decode_bytes_limit >= 256 << 20 and cfg.decode_wait_s == 5.0
    assert config_from_args(["--decode-wait-s", "0.5"], environ={}).decode_wait_s == 0.5
    with pytest.raises(SystemExit):
        config_from_args(["--decode-wait-s", "-1"], environ={})
    assert config_from_args(["--max-decode-mb", "300"], environ={}).decode_bytes_limit == 300 << 20
    assert config_from_args([], environ={"SMG_FAST_MAX_DECODE_MB": "77"}).max_decode_mb == 77
    with pytest.raises(SystemExit):
        config_from_args(["--max-decode-mb", "-1"], environ={})
    text = build_parser({}).format_help()
    assert "--max-decode-mb" in text and "SMG_FAST_MAX_DECODE_MB" in text


def test_an_item_cut_while_it_waits_its_turn_decodes_nothing():
    """Stopped while queued: its turn, once it comes, goes back at once and it raises."""
    from types import SimpleNamespace

    from smg_fast.server.request_error import StoppedError
    from smg_fast.server.service import PreprocessService
    from smg_fast.server.ticket import Ticket

    budget = DecodeBudget(100, 5.0)
    assert budget.take(100)  # another item decodes
    ticket = Ticket()
    item = SimpleNamespace(planned=SimpleNamespace(decode_bytes=60), index=0)

    def cut_then_free() -> None:
        ticket.stop(grpc.StatusCode.CANCELLED, "the client cancelled")
        budget.give(100)  # the other item is done: the queued one's turn comes

    threading.Timer(0.2, cut_then_free).start()
    with pytest.raises(StoppedError):
        PreprocessService._take_decode(SimpleNamespace(decode=budget), item, ticket)
    assert budget.stats()["bytes"] == 0 and budget.stats()["holders"] == 0

