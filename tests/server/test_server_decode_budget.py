"""The decode budget: decoded images held at once across requests, planned from their headers.

Large images that scale down to small outputs pass --max-output-mb and admission; their decode
memory is planned from the headers and taken from --max-decode-mb before anything is decoded, so
a second such request is refused RESOURCE_EXHAUSTED while the first decodes, and served once it
is done. The plan is checked against what decoding really takes (the process's peak RSS).
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
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


def test_second_large_decode_is_refused_while_the_first_decodes(start_server, media_dir,
                                                                big_jpeg, small_jpegs,
                                                                want_big, ours):
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
            # small enough for the room left: served, exact, meanwhile
            small = small_jpegs["flower"]
            out = c.preprocess(small, transport="inline", max_pixels=SMALL_PX)
            assert np.array_equal(out.pixel_values,
                                  ours("qwen2_vl", max_pixels=SMALL_PX)(small)["pixel_values"])
            with pytest.raises(grpc.RpcError) as err:
                c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "--max-decode-mb" in err.value.details()
            assert "retry with backoff" in err.value.details()
            assert not first.done()  # the refusal came while the first still held its share
        finally:
            first.cancel()
        _wait(lambda: budget.stats()["holders"] == 0 and not srv.server.work_pending)
        assert budget.stats()["bytes"] == 0
        out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)  # its turn now
        assert np.array_equal(out.pixel_values, want_big)
    stats = budget.stats()
    assert stats["rejected"] >= 1 and stats["peak_bytes"] <= BUDGET_MB << 20
    text = srv.server.metrics.registry.get_sample_value("smg_fast_decode_rejected_total")
    assert text is not None and text >= 1


def test_lone_request_past_the_budget_is_served(start_server, big_jpeg, want_big):
    """One request needing more than the whole budget runs when nothing else decodes."""
    srv = start_server(max_decode_mb=16, pixel_cache_mb=0)
    with Client(srv.target, timeout=120) as c:
        out = c.preprocess(big_jpeg, transport="inline", max_pixels=SMALL_PX)
    assert np.array_equal(out.pixel_values, want_big)
    assert srv.server.decode.stats()["peak_bytes"] == planned_big(big_jpeg)
    assert srv.server.decode.stats()["bytes"] == 0


def test_decode_budget_flag_and_env():
    from smg_fast.server.flags import build_parser, config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.decode_bytes_limit >= 256 << 20
    assert config_from_args(["--max-decode-mb", "300"], environ={}).decode_bytes_limit == 300 << 20
    assert config_from_args([], environ={"SMG_FAST_MAX_DECODE_MB": "77"}).max_decode_mb == 77
    with pytest.raises(SystemExit):
        config_from_args(["--max-decode-mb", "-1"], environ={})
    text = build_parser({}).format_help()
    assert "--max-decode-mb" in text and "SMG_FAST_MAX_DECODE_MB" in text
