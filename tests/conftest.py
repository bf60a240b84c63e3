"""Shared fixtures: real test images shipped in installed packages, derived images in every PIL
mode the processors must handle, and transformers' PIL Qwen2-VL processor as the oracle.

Nothing here imports smg_fast, so a broken package shows up as failures in the test modules,
not as a conftest error.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest_plugins = ["suite_markers"]  # the slow / spawns / oracle / nixl markers

# --------------------------------------------------------------------------------------------
# Real images
# --------------------------------------------------------------------------------------------


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed (needed for its sample images)")
    return Path(list(spec.submodule_search_locations)[0])


def _real_image_paths() -> dict[str, Path]:
    skimage = _package_dir("skimage") / "data"
    mpl = _package_dir("matplotlib") / "mpl-data" / "sample_data"
    sklearn = _package_dir("sklearn") / "datasets" / "images"
    return {
        "astronaut": skimage / "astronaut.png",  # RGB 512x512
        "chelsea": skimage / "chelsea.png",  # RGB 451x300
        "coffee": skimage / "coffee.png",  # RGB 600x400
        "camera": skimage / "camera.png",  # L 512x512
        "retina": skimage / "retina.jpg",  # RGB 1411x1411
        "rocket": skimage / "rocket.jpg",  # RGB 640x427
        "logo": skimage / "logo.png",  # RGBA 500x500
        "hubble": skimage / "hubble_deep_field.jpg",  # RGB 1000x872
        "grace_hopper": mpl / "grace_hopper.jpg",  # RGB 512x600
        "logo2": mpl / "logo2.png",  # RGBA with real transparency
        "china": sklearn / "china.jpg",  # RGB 640x427
        "flower": sklearn / "flower.jpg",  # RGB 640x427
    }


REAL_IMAGE_PATHS = _real_image_paths()
REAL_IMAGE_NAMES = tuple(REAL_IMAGE_PATHS)

# Images derived from real photos, one per PIL mode / transparency case the pipeline handles.
MODE_KINDS = (
    "P",  # palette, no transparency
    "P_transparency",  # palette with a transparency index (info["transparency"] = int)
    "LA",  # grey + varying alpha
    "RGBA",  # colour + varying alpha (fully transparent, opaque and partial pixels)
    "RGB_colorkey",  # RGB with info["transparency"] = (r, g, b) colour key
    "CMYK",
    "I;16",  # 16-bit grey spanning values above 255
    "1",  # bilevel (dithered)
    "L",
)


class RealImages:
    """Access to the shipped sample images. Every call returns a fresh, fully loaded object."""

    names = REAL_IMAGE_NAMES
    mode_kinds = MODE_KINDS

    def path(self, name: str) -> Path:
        p = REAL_IMAGE_PATHS[name]
        if not p.is_file():
            raise FileNotFoundError(p)
        return p

    def open(self, name: str) -> Image.Image:
        with Image.open(self.path(name)) as im:
            im.load()
            return im.copy()

    def rgb(self, name: str) -> Image.Image:
        return self.open(name).convert("RGB")

    def rgb_array(self, name: str) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.rgb(name)))

    def bytes(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def mode_image(self, kind: str) -> Image.Image:
        return make_mode_image(self, kind)


def _alpha_from_photo(images: RealImages, size: tuple[int, int]) -> np.ndarray:
    """A real-content alpha plane with exact 0 and 255 regions as well as partial values."""
    alpha = np.array(images.open("camera").resize(size, Image.Resampling.BILINEAR), dtype=np.uint8)
    w, h = size
    alpha[: h // 6, :] = 0  # fully transparent band
    alpha[-(h // 6) :, :] = 255  # fully opaque band
    return alpha


def make_mode_image(images: RealImages, kind: str) -> Image.Image:
    base = images.rgb("chelsea")  # 451x300 real photo
    if kind == "P":
        return images.rgb("rocket").quantize(256)
    if kind == "P_transparency":
        p = base.quantize(64)
        counts = np.bincount(np.asarray(p).ravel(), minlength=256)
        p.info["transparency"] = int(counts.argmax())  # the most common index: many pixels
        return p
    if kind == "LA":
        grey = np.asarray(base.convert("L"))
        alpha = _alpha_from_photo(images, base.size)
        return Image.merge("LA", (Image.fromarray(grey), Image.fromarray(alpha)))
    if kind == "RGBA":
        rgba = base.convert("RGBA")
        rgba.putalpha(Image.fromarray(_alpha_from_photo(images, base.size)))
        return rgba
    if kind == "RGB_colorkey":
        rgb = images.rgb("coffee")
        arr = np.asarray(rgb).reshape(-1, 3).astype(np.int32)
        packed = (arr[:, 0] << 16) | (arr[:, 1] << 8) | arr[:, 2]
        colors, counts = np.unique(packed, return_counts=True)
        top = int(colors[counts.argmax()])  # the most common colour: many keyed pixels
        key = (top >> 16, (top >> 8) & 255, top & 255)
        rgb.info["transparency"] = key
        return rgb
    if kind == "CMYK":
        return base.convert("CMYK")
    if kind == "I;16":
        grey = np.asarray(base.convert("L")).astype(np.uint16)
        im = Image.fromarray(grey * 2 + 40)  # 40..550: both below and above 255
        assert im.mode == "I;16", im.mode
        return im
    if kind == "1":
        return images.open("camera").convert("1")
    if kind == "L":
        return images.open("camera")
    raise KeyError(kind)


@pytest.fixture(scope="session")
def real_images() -> RealImages:
    return RealImages()


@pytest.fixture(params=REAL_IMAGE_NAMES)
def real_image_name(request) -> str:
    return request.param


@pytest.fixture(params=MODE_KINDS)
def mode_kind(request) -> str:
    return request.param


# --------------------------------------------------------------------------------------------
# Encoded / on-disk variants
# --------------------------------------------------------------------------------------------


def encode(image: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **kwargs)
    return buf.getvalue()


@pytest.fixture(scope="session")
def encode_image():
    return encode


@pytest.fixture(scope="session")
def exif_rotated_jpeg(tmp_path_factory, real_images) -> Path:
    """A real photo saved as JPEG with EXIF orientation 6 (rotate 90 CW to display)."""
    im = real_images.rgb("rocket")  # 640x427, not square, so a missed rotation changes the grid
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation
    path = tmp_path_factory.mktemp("exif") / "rocket_orientation6.jpg"
    im.save(path, "JPEG", quality=90, exif=exif)
    with Image.open(path) as check:
        assert check.getexif().get(0x0112) == 6
    return path


# --------------------------------------------------------------------------------------------
# The oracle: transformers' PIL Qwen2-VL processor
# --------------------------------------------------------------------------------------------

from smg_fast.testing.oracles import HUB_QWEN as QWEN_HF_CONFIGS  # noqa: E402

QWEN_FAMILIES = tuple(QWEN_HF_CONFIGS)


def make_hf_qwen(family: str, *, min_pixels=None, max_pixels=None, patch_size=None):
    """transformers' Qwen2VLImageProcessorPil configured like smg_fast's `family` (optionally
    with the same min/max pixel or patch overrides), checked through its attributes."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from smg_fast.testing.oracles import hf_qwen

    proc = hf_qwen(Qwen2VLImageProcessorPil, family, min_pixels=min_pixels,
                   max_pixels=max_pixels, patch_size=patch_size)
    assert proc.resample == Image.Resampling.BICUBIC
    assert proc.do_resize and proc.do_rescale and proc.do_normalize and proc.do_convert_rgb
    return proc


@pytest.fixture(scope="session")
def hf_qwen():
    """Factory: hf_qwen(family, min_pixels=..., max_pixels=..., patch_size=...) (cached)."""
    cache: dict = {}

    def factory(family: str, **overrides):
        key = (family, tuple(sorted(overrides.items())))
        if key not in cache:
            cache[key] = make_hf_qwen(family, **overrides)
        return cache[key]

    return factory


@pytest.fixture(params=QWEN_FAMILIES)
def qwen_family(request) -> str:
    return request.param


def hf_call(hf_proc, images, **kwargs):
    """The oracle's (pixel_values, image_grid_thw) as arrays (cached: tests/oracle_cache.py)."""
    from oracle_cache import hf_processor_call

    out = hf_processor_call(hf_proc, images, **kwargs)
    return out["pixel_values"], out["image_grid_thw"]


@pytest.fixture(scope="session")
def hf_run():
    return hf_call


# --------------------------------------------------------------------------------------------
# Small assertion helpers
# --------------------------------------------------------------------------------------------


def assert_arrays_equal(ours, ref, what: str = "pixel_values") -> None:
    """np.array_equal with a diagnostic message (shape, dtype, count and size of differences)."""
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != reference {ref.shape}"
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != reference {ref.dtype}"
    if np.array_equal(ours, ref):
        return
    diff = ours != ref
    idx = np.argwhere(diff)[0].tolist()
    if np.issubdtype(ours.dtype, np.floating) or np.issubdtype(ours.dtype, np.integer):
        mx = np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()
    else:
        mx = "n/a"
    raise AssertionError(
        f"{what}: {int(diff.sum())} of {diff.size} values differ (max abs diff {mx}); "
        f"first at {idx}: ours={ours[tuple(idx)]!r} reference={ref[tuple(idx)]!r}"
    )


@pytest.fixture(scope="session")
def assert_equal():
    return assert_arrays_equal


def tokens_list(num_tokens) -> list[int]:
    """out["num_tokens"] may be a list[int] or an int64 array: normalise to list[int]."""
    return [int(v) for v in np.asarray(num_tokens).reshape(-1).tolist()]


@pytest.fixture(scope="session")
def as_token_list():
    return tokens_list


# --------------------------------------------------------------------------------------------
# The package under test (imported lazily so conftest itself never fails on it)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def smg():
    import smg_fast

    return smg_fast


@pytest.fixture(scope="session")
def ours(smg):
    """Factory: ours(family_or_dir, **overrides) -> cached smg_fast processor."""
    cache: dict = {}

    def factory(name, **overrides):
        key = (str(name), tuple(sorted((k, repr(v)) for k, v in overrides.items())))
        if key not in cache:
            cache[key] = smg.load_processor(name, **overrides)
        return cache[key]

    return factory


# --------------------------------------------------------------------------------------------
# Service tests: real servers on loopback, real /dev/shm
# --------------------------------------------------------------------------------------------

SHM_DIR = Path("/dev/shm")
# Processes whose segments this test session answers for: itself and the servers it spawned
# (tests add the pids of their subprocesses). Other processes' segments are never touched.
OUR_PIDS: set[int] = set()


def shm_files() -> set[str]:
    """smg-fast segment files in /dev/shm created by this session's processes (and the
    liveness lock files of those that are gone: a live producer keeps its own)."""
    import os
    import re

    from smg_fast.transport.shm_owner import pid_alive

    pids = {os.getpid(), *OUR_PIDS}
    pattern = re.compile(r"^smg-fast-(\d+)-")
    out = set()
    try:
        for p in SHM_DIR.iterdir():
            m = pattern.match(p.name)
            if m and int(m.group(1)) in pids:
                if p.name.endswith(".lock") and pid_alive(int(m.group(1))):
                    continue
                out.add(p.name)
    except OSError:
        pass
    return out


@pytest.fixture(scope="session")
def track_pid():
    """track_pid(pid): count a spawned process's segments as this session's."""
    return OUR_PIDS.add


def pytest_sessionstart(session) -> None:
    session.config._smg_shm_before = shm_files()


def pytest_sessionfinish(session, exitstatus) -> None:
    """The suite must leave no smg-fast-* file in /dev/shm (each is someone's leak)."""
    before = getattr(session.config, "_smg_shm_before", set())
    leaked = sorted(shm_files() - before)
    if leaked:
        for name in leaked:
            (SHM_DIR / name).unlink(missing_ok=True)
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = f"FAILED: {len(leaked)} smg-fast shm segment(s) left in /dev/shm: {leaked[:5]}"
        if tr is not None:
            tr.write_line(msg, red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _pool_ready() -> set[str]:
    """Segments servers in this process hold ready in their pools, and the private directories
    of their reused segments (owned, not leaked)."""
    import sys

    pool = sys.modules.get("smg_fast.transport.shm_pool")
    reuse = sys.modules.get("smg_fast.transport.shm_reuse")  # live servers' private dirs
    return ((pool.ready_segment_names() if pool is not None else set())
            | (reuse.live_reuse_dirs() if reuse is not None else set()))


@pytest.fixture
def no_shm_leak():
    """Fails the test if it leaves a new smg-fast segment in /dev/shm (segments a live server
    keeps ready in its pool are not leaks)."""
    import time

    before = shm_files()
    yield
    deadline = time.monotonic() + 30.0  # a bound for a loaded host; a clean test waits 0 s
    while True:  # a pool may be between creating a segment and listing it as ready
        leaked = shm_files() - before - _pool_ready()
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"shm segments leaked: {sorted(leaked)}"


@pytest.fixture(scope="session")
def small_jpegs(real_images) -> dict[str, bytes]:
    """Small JPEGs of real photos (fast to serve, still real content), several sizes/ratios."""
    sizes = {"chelsea": (120, 80), "rocket": (96, 64), "coffee": (90, 60), "astronaut": (72, 72),
             "grace_hopper": (64, 75), "china": (128, 85), "flower": (100, 67),
             "hubble": (115, 100)}
    out = {}
    for name, size in sizes.items():
        im = real_images.rgb(name).resize(size, Image.Resampling.BICUBIC)
        out[name] = encode(im, "JPEG", quality=90)
    return out


@pytest.fixture(scope="session")
def start_server():
    """Factory: start_server(**ServerConfig fields) -> a running BackgroundServer on a free
    127.0.0.1 port (stopped at the end of the session, or by the test)."""
    from smg_fast.server import BackgroundServer, ServerConfig

    started = []

    def factory(**fields):
        fields.setdefault("host", "127.0.0.1")
        fields.setdefault("port", 0)
        fields.setdefault("workers", 2)
        fields.setdefault("drain_timeout_s", 5.0)
        fields.setdefault("rdma_listen_port", 0)  # never the fixed default port in tests
        srv = BackgroundServer(ServerConfig(**fields)).start()
        started.append(srv)
        return srv

    yield factory
    for srv in started:
        srv.stop(timeout=2.0)


@pytest.fixture()
def overlapped(monkeypatch) -> list:
    """What each decoders.decode_jpeg_running call returned in this test (True: a JPEG decoded
    inside the native call that computed it)."""
    from smg_fast.imaging import decoders

    seen: list = []
    real = decoders.decode_jpeg_running

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(decoders, "decode_jpeg_running", spy)
    return seen
