"""Hostile inputs.

Output sizes are planned from the header and refused before decoding, only allowlisted formats reach
a decoder (never Ghostscript), file:// URLs cannot be raced out of the allowed directory, and
scratch blocks go home to the thread that took them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import urllib.request

import numpy as np
import pytest
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

pytest.importorskip("grpc")

import grpc  # noqa: E402

import smg_fast  # noqa: E402
from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.servers import ServerProcess, free_port

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
EPS = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n"
       b"newpath 0 0 moveto 10 10 lineto stroke\nshowpage\n%%EOF\n")


def encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def tiny_png() -> bytes:
    data = encode(Image.new("RGB", (1, 1), (10, 20, 30)), "PNG")
    assert len(data) < 100
    return data


def jpeg_declaring(width: int, height: int) -> bytes:
    """A small JPEG whose SOF header is patched to claim width x height.

    A header bomb whose data ends long before the pixels it declares (libjpeg still decodes it in
    full, padding the missing data: seconds of work for 9000x9000)."""
    data = bytearray(encode(Image.new("RGB", (16, 16), (90, 120, 150)), "JPEG", quality=50))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 7] = height.to_bytes(2, "big")
    data[sof + 7:sof + 9] = width.to_bytes(2, "big")
    return bytes(data)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# ---- in-process: plan before decode ----


def test_plan_batch_sizes_a_header_bomb_without_decoding():
    proc = smg_fast.load_processor("qwen2_vl")
    bomb = jpeg_declaring(9000, 9000)
    assert len(bomb) < 4096
    with proc.plan_batch(bomb) as planned:
        _, gh, gw = proc.grid(9000, 9000)
        assert planned.nbytes == gh * gw * 1176 * 4
        assert planned.grid.tolist() == [[1, gh, gw]]
    # Over the caller's limit: refused from the plan.
    with pytest.raises(smg_fast.OutputTooLargeError, match="over the limit") as info:
        proc.prepare(bomb, max_output_bytes=planned.nbytes - 1)
    assert isinstance(info.value, smg_fast.InvalidImageError)
    assert (info.value.index, info.value.nbytes) == (0, planned.nbytes)


def test_limit_names_the_image_that_crosses_it(real_images):
    proc = smg_fast.load_processor("qwen2_vl")
    img = real_images.bytes("rocket")
    one = proc.plan_batch(img).nbytes
    with pytest.raises(smg_fast.OutputTooLargeError, match=r"^image 2:"):
        proc.prepare([img, img, img], max_output_bytes=2 * one + 1)
    batch = proc.prepare([img, img], max_output_bytes=2 * one)
    assert batch.nbytes == 2 * one


def test_absurd_configured_range_is_a_typed_error():
    proc = smg_fast.load_processor("qwen2_vl", min_pixels=2**63, max_pixels=2**63)
    with pytest.raises(smg_fast.OutputTooLargeError):
        proc(np.zeros((10, 10, 3), np.uint8))


def test_exif_rotation_is_in_the_plan(real_images):
    """Orientation 6 (rotate 90) swaps the sides exif_transpose produces.

    The header-only plan knows it, and prepare's output is unchanged by the two-step path."""
    proc = smg_fast.load_processor("qwen2_vl")
    exif = Image.Exif()
    exif[0x0112] = 6
    img = real_images.rgb("chelsea").resize((200, 90))
    data = encode(img, "JPEG", quality=90, exif=exif.tobytes())
    planned = proc.plan_batch(data)
    expect = proc.plan(90, 200)
    assert planned.plans == [expect]
    batch = planned.decode()
    assert batch.plans == [expect]
    out = proc(data)
    assert np.array_equal(batch.write_into(np.empty(batch.shape, np.float32)),
                          out["pixel_values"])
    assert out["image_grid_thw"].tolist() == [[1, expect.grid_h, expect.grid_w]]


# ---- in-process: formats ----


def test_only_allowlisted_formats_are_opened():
    proc = smg_fast.load_processor("qwen2_vl")
    with pytest.raises(smg_fast.InvalidImageError, match="image format EPS is not accepted"):
        proc(EPS)
    ppm = encode(Image.new("RGB", (40, 30), (1, 2, 3)), "PPM")
    with pytest.raises(smg_fast.InvalidImageError, match="image format PPM is not accepted"):
        proc(ppm)
    wider = smg_fast.load_processor("qwen2_vl", image_formats="ppm, jpeg")
    assert wider.config.image_formats == ("PPM", "JPEG")
    assert np.array_equal(wider(ppm)["pixel_values"],
                          proc(Image.open(io.BytesIO(ppm)).convert("RGB"))["pixel_values"])
    assert wider.config.fingerprint == proc.config.fingerprint  # a limit, not an output change
    with pytest.raises(ValueError, match="not known to Pillow"):
        smg_fast.load_processor("qwen2_vl", image_formats=["JPEG", "NOPE"])


_GS_PROBE = textwrap.dedent("""
    import io, sys
    from PIL import Image
    import smg_fast
    eps = sys.stdin.buffer.read()
    if sys.argv[1] == "pillow":  # the control: Pillow itself, no allowlist
        try:
            Image.open(io.BytesIO(eps)).load()
        except Exception as exc:  # the fake gs fails: Pillow reports its exit status
            print("pillow failed:", type(exc).__name__)
        sys.exit(0)
    proc = smg_fast.load_processor("qwen2_vl")
    for item in (eps, Image.open(io.BytesIO(eps))):  # bytes, and a lazily opened PIL image
        try:
            proc(item)
            print("served")
        except smg_fast.InvalidImageError as exc:
            print("refused:", exc)
""")


def _run_with_fake_gs(tmp_path, formats: str) -> tuple[str, bool]:
    """Runs the probe with a 'gs' first on PATH that records being run."""
    bin_dir, marker = tmp_path / f"bin-{formats}", tmp_path / f"gs-ran-{formats}"
    bin_dir.mkdir()
    gs = bin_dir / "gs"
    gs.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 1\n")
    gs.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = subprocess.run([sys.executable, "-c", _GS_PROBE, formats], input=EPS, env=env,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode(), marker.exists()


def test_eps_never_runs_ghostscript(tmp_path):
    text, ran = _run_with_fake_gs(tmp_path, "default")
    assert text.count("image format EPS is not accepted") == 2, text
    assert not ran
    # Control: Pillow alone does run the (fake) gs, so the check above can see it.
    text, ran = _run_with_fake_gs(tmp_path, "pillow")
    assert ran, text
    # and no configuration can allow it
    with pytest.raises(ValueError, match=r"\['EPS'\] are refused"):
        smg_fast.load_processor("qwen2_vl", image_formats="JPEG,EPS")


# ---- the real server ----


@pytest.fixture(scope="module")
def server_process():
    """A server process with the pixel cache on (the path that built the oversized output)."""
    metrics_port = free_port()
    srv = ServerProcess(["--metrics-port", str(metrics_port), "--workers", "2",
                         "--pixel-cache-mb", "256", "--transport", "inline",
                         "--rdma-listen-port", "0", "--log-level", "warning"])
    try:
        srv.wait(60)
        yield srv.proc, srv.target, metrics_port
    finally:
        srv.stop(30)


def _call(target: str, data: bytes, **fields) -> grpc.RpcError | pb.PreprocessResponse:
    req = pb.PreprocessRequest(items=[pb.MediaItem(data=data)], **fields)
    with Client(target, timeout=60) as c:
        try:
            raw = c._stub.Preprocess(req, timeout=60)
        except grpc.RpcError as err:
            return err
    return raw


def test_min_max_pixels_outside_the_model_range_refused(server_process, small_jpegs):
    proc, target, _ = server_process
    png = tiny_png()
    _call(target, small_jpegs["rocket"])  # warm
    rss0 = rss_bytes(proc.pid)
    for _ in range(5):
        err = _call(target, png, min_pixels=40_000_000, max_pixels=40_000_000)
        assert isinstance(err, grpc.RpcError)
        assert err.code() == INVALID, err.details()
        assert "12845056" in err.details()
    assert rss_bytes(proc.pid) - rss0 < 256 << 20
    for lo, hi in [(2**63, 2**63), (2**64 - 1, 2**64 - 1), (3136, 12845057), (1000, 100000)]:
        err = _call(target, png, min_pixels=lo, max_pixels=hi)
        assert isinstance(err, grpc.RpcError) and err.code() == INVALID, (lo, hi)
    # Narrowing the range is still a request's right: the grid transformers computes for it.
    ok = _call(target, small_jpegs["rocket"], min_pixels=3136, max_pixels=200_000)
    assert not isinstance(ok, grpc.RpcError), ok
    w, h = Image.open(io.BytesIO(small_jpegs["rocket"])).size
    rh, rw = smart_resize(h, w, factor=28, min_pixels=3136, max_pixels=200_000)
    assert list(ok.items[0].grid_thw) == [1, rh // 14, rw // 14]


def _decodes(metrics_port: int) -> float:
    """How many images the server has decoded (its decode histogram's count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith("smg_fast_decode_seconds_count"):
            return float(line.split()[-1])
    raise AssertionError("no smg_fast_decode_seconds_count in /metrics")


def test_inline_header_bomb_refused_from_the_plan(server_process, small_jpegs):
    """9000x9000 declared in a 700-byte JPEG.

    Its output (308 MiB) cannot go inline. The server says so from the header, without decoding it
    (the decode count does not move)."""
    proc, target, metrics_port = server_process
    _call(target, small_jpegs["china"])
    decoded = _decodes(metrics_port)
    assert decoded >= 1
    rss0 = rss_bytes(proc.pid)
    for _ in range(3):
        err = _call(target, jpeg_declaring(9000, 9000), transport="inline")
        assert isinstance(err, grpc.RpcError)
        assert err.code() == EXHAUSTED, err.details()
        assert "message limit" in err.details()
    assert _decodes(metrics_port) == decoded
    assert rss_bytes(proc.pid) - rss0 < 256 << 20


def test_eps_refused_by_the_server(server_process):
    _, target, _ = server_process
    err = _call(target, EPS)
    assert isinstance(err, grpc.RpcError) and err.code() == INVALID
    assert "image format EPS is not accepted" in err.details()


@pytest.mark.usefixtures("no_shm_leak")
def test_max_output_mb_per_request(start_server, real_images, hf_qwen2, hf_run, assert_equal):
    srv = start_server(max_output_mb=8, pixel_cache_mb=16)
    big = real_images.bytes("rocket")  # 6.2 MiB of float32 (Qwen2-VL)
    want, _ = hf_run(hf_qwen2, real_images.open("rocket"))
    with Client(srv.target, timeout=30) as c:
        out = c.preprocess([big], transport="inline")  # one under the limit: served exactly
        assert_equal(out.pixel_values, want)
        for transport in ("inline", "shm"):
            with pytest.raises(grpc.RpcError) as info:
                c.preprocess([big, big], transport=transport)
            assert info.value.code() == EXHAUSTED
            assert "item 1:" in info.value.details()
            assert "--max-output-mb" in info.value.details()


def test_limit_flags_env_and_help(capsys):
    from smg_fast.server.config import ServerConfig
    from smg_fast.server.flags import config_from_args

    cfg = config_from_args([], environ={})
    assert cfg.max_output_mb == 1024 and cfg.image_format_list == (
        "JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "MPO")
    cfg = config_from_args([], environ={"SMG_FAST_MAX_OUTPUT_MB": "7",
                                        "SMG_FAST_IMAGE_FORMATS": "png, jpeg"})
    assert cfg.max_output_bytes == 7 << 20 and cfg.image_format_list == ("PNG", "JPEG")
    cfg = config_from_args(["--image-formats", "webp"], environ={"SMG_FAST_IMAGE_FORMATS": "png"})
    assert cfg.image_format_list == ("WEBP",)
    for argv in (["--image-formats", "png,nope"], ["--max-output-mb", "0"]):
        with pytest.raises(SystemExit):
            config_from_args(argv, environ={})
    with pytest.raises(ValueError, match="image-formats"):
        ServerConfig(image_formats="").validate()
    out = subprocess.run([sys.executable, "-m", "smg_fast.server", "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    for text in ("--max-output-mb", "SMG_FAST_MAX_OUTPUT_MB", "--image-formats",
                 "SMG_FAST_IMAGE_FORMATS"):
        assert text in out, text


def test_a_failed_request_frees_what_it_built(server_process):
    """A failed request frees the tensors it built for its earlier items.

    Item 0 is served (a 146 MiB inline tensor), item 1 is garbage: the request fails, and its
    tensor must not outlive it (not even referenced by the exception's traceback until a garbage
    collection happens to run).
    """
    proc, target, _ = server_process
    rng = np.random.default_rng(7)
    big = encode(Image.fromarray(rng.integers(0, 255, (2000, 3000, 3), dtype=np.uint8)), "JPEG",
                 quality=80)

    assert not isinstance(_call(target, big, transport="inline"), grpc.RpcError)  # alone: fine

    def failing_request() -> None:
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=big),
                                          pb.MediaItem(data=b"not an image" * 8)],
                                   transport="inline")
        with Client(target, timeout=60) as c, pytest.raises(grpc.RpcError) as info:
            c._stub.Preprocess(req, timeout=60)
        assert info.value.code() == INVALID and "item 1:" in info.value.details()

    failing_request()  # pools, caches and allocator arenas warm up
    rss0 = rss_bytes(proc.pid)
    for _ in range(8):
        failing_request()
    grown = rss_bytes(proc.pid) - rss0
    print(f"RSS grew by {grown / 2**20:.0f} MiB over 8 failed requests")
    assert grown < 200 << 20  # one leaked tensor is 146 MiB
