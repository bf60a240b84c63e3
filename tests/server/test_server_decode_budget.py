"""The decode budget: decoded images held at once across requests, planned from their headers.

Large images that scale down to small outputs pass --max-output-mb and admission; their decode
memory is planned from the headers and taken from --max-decode-mb before anything is decoded, so
a second such request is refused RESOURCE_EXHAUSTED while the first decodes, and served once it
is done. The plan is checked against what decoding really takes (the process's peak RSS).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from PIL import Image
from support.images import encode

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast.client import Client, build_request  # noqa: E402
from smg_fast.imaging.decode_memory import DECODER_STATE_BYTES, PIXEL_BYTES  # noqa: E402

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
    png = encode(keyed, "PNG", transparency=0)  # composited onto white by Pillow
    with proc.plan_batch([png, big_jpeg]) as planned:  # a batch holds all its images
        assert planned.decode_bytes == (6 * keyed.width * keyed.height * PIXEL_BYTES + len(png)
                                        + DECODER_STATE_BYTES + planned_big(big_jpeg))


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


@pytest.mark.parametrize("kind", ["jpeg", "jpeg_turned", "png_keyed", "png_rgba", "png_rgb"])
def test_planned_decode_memory_bounds_the_real_peak(tmp_path, real_images, big_jpeg, kind):
    """Decoding takes no more than planned: the peak RSS of a fresh process grows by at most it."""
    if kind == "jpeg":
        data = big_jpeg
    elif kind == "jpeg_turned":
        exif = Image.Exif()
        exif[0x0112] = 8
        data = encode(Image.open(io.BytesIO(big_jpeg)), "JPEG", quality=85, exif=exif.tobytes())
    else:
        photo = real_images.rgb("rocket").resize((W, H), Image.Resampling.BICUBIC)
        if kind == "png_keyed":
            data = encode(photo.convert("P", palette=Image.Palette.ADAPTIVE), "PNG",
                          transparency=3, compress_level=1)
        elif kind == "png_rgb":
            data = encode(photo, "PNG", compress_level=1)
        else:
            rgba = photo.convert("RGBA")
            rgba.putalpha(128)
            data = encode(rgba, "PNG", compress_level=1)
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
