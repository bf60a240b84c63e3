"""Fixtures several test areas share, and the session's check that nothing is left in /dev/shm.

The real images, the oracle, smg_fast's processors and in-process servers. Helpers live in
tests/support/ (imported as ``support.<name>``: this file puts tests/ on sys.path); each area's
own fixtures in its conftest.py. Nothing here imports smg_fast at module level but the test
harness, so a broken package shows up as failures in the test modules, not as a conftest error.
"""

from __future__ import annotations

import inspect
import os
import time

import numpy as np
import pytest
from PIL import Image
from support.hf_oracle import QWEN_FAMILIES, hf_call, make_hf_qwen
from support.images import RealImages, encode
from support.outputs import assert_arrays_equal, check_outputs
from support.shm_leaks import OUR_PIDS, SHM_DIR, pool_ready, shm_files

# No test reaches the Hugging Face hub: set before anything imports huggingface_hub (which reads
# it once); the hub download test runs its own fake hub on loopback.
os.environ["HF_HUB_OFFLINE"] = "1"

pytest_plugins = ["support.suite_markers"]  # the slow / spawns / oracle / nixl markers

# --------------------------------------------------------------------------------------------
# Real images
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_images() -> RealImages:
    return RealImages()


@pytest.fixture(scope="module")
def photo(real_images) -> Image.Image:
    """A real photo in RGB: rocket, 640x427 (not square; several JPEG block rows)."""
    return real_images.rgb("rocket")


@pytest.fixture(scope="module")
def chelsea(real_images) -> Image.Image:
    """The chelsea photo in RGB, 451x300: several block rows, a real resize."""
    return real_images.rgb("chelsea")


@pytest.fixture(scope="module")
def photo_720p(photo) -> Image.Image:
    """The photo resized to 1280x720 (Pillow's default filter): a server-sized JPEG source."""
    return photo.resize((1280, 720))


@pytest.fixture
def pillow_allocator():
    """Factory: pillow_allocator(one_block) sets Pillow's single-block allocator for one test.

    The setting is process-wide (the engine plug-ins turn it on), so tests that need Pillow's
    several blocks, or the single block, say which; the setting is restored afterwards."""
    setter = getattr(Image.core, "set_use_block_allocator", None)  # kept: a test may hide it
    if setter is None:  # Pillow before 11.2: images over the block size are always in blocks
        def absent(one_block: bool) -> None:
            if one_block:
                pytest.skip("this Pillow has no single-block allocator (11.2 on)")

        yield absent
        return
    before = bool(Image.core.get_use_block_allocator())

    def use(one_block: bool) -> None:
        setter(1 if one_block else 0)

    yield use
    setter(1 if before else 0)


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


# --------------------------------------------------------------------------------------------
# The oracle (transformers' PIL Qwen2-VL processor) and the comparisons with it
# --------------------------------------------------------------------------------------------


@pytest.fixture(params=QWEN_FAMILIES)
def qwen_family(request) -> str:
    return request.param


@pytest.fixture(params=["qwen2_vl", "qwen3_vl", "kimi_k25"])
def family(request) -> str:
    """One family of each kind: Qwen2-VL, Qwen3-VL (16-pixel patches) and Kimi-K2.5."""
    return request.param


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


@pytest.fixture(scope="session")
def hf_qwen2(hf_qwen):
    """transformers' Qwen2VLImageProcessorPil with Qwen2-VL's hub configuration."""
    return hf_qwen("qwen2_vl")


@pytest.fixture(scope="session")
def hf_run():
    return hf_call


@pytest.fixture(scope="session")
def assert_equal():
    return assert_arrays_equal


@pytest.fixture
def check(assert_equal):
    """check(out, ref_pv, ref_grid): a Qwen processor's outputs equal the oracle's."""

    def run(out, ref_pv, ref_grid):
        check_outputs(out, ref_pv, ref_grid, assert_equal=assert_equal)

    return run


@pytest.fixture
def check_kimi(assert_equal):
    """check_kimi(out, ref_pv, ref_grid, merge=2): Kimi's outputs equal the reference's."""

    def run(out, ref_pv, ref_grid, merge=2):
        grid = np.asarray(out["image_grid_thw"])
        assert grid.dtype == np.int64
        assert grid.tolist() == ref_grid.tolist(), f"grid {grid.tolist()} != {ref_grid.tolist()}"
        assert np.array_equal(np.asarray(out["grid_thws"]), grid)
        assert_equal(np.asarray(out["pixel_values"]), ref_pv)
        tokens = [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1).tolist()]
        assert tokens == [t * h * w // (merge * merge) for t, h, w in ref_grid.tolist()]

    return run


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


@pytest.fixture()
def overlapped(monkeypatch) -> list:
    """What each decoders.decode_jpeg_running call returned in this test.

    True: a JPEG decoded inside the native call that computed it.
    """
    from smg_fast.imaging import decoders

    seen: list = []
    real = decoders.decode_jpeg_running

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(decoders, "decode_jpeg_running", spy)
    return seen


# --------------------------------------------------------------------------------------------
# Servers in this process, on loopback
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def start_server():
    """Factory: start_server(**ServerConfig fields) -> a running BackgroundServer.

    On a free 127.0.0.1 port; stopped at the end of the session, or by the test.
    """
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that uses `server` runs once per variant its module lists in SERVER_VARIANTS."""
    variants = getattr(metafunc.module, "SERVER_VARIANTS", ())
    if variants and "server" in metafunc.fixturenames:
        metafunc.parametrize("server", list(variants), indirect=True, scope="module")


@pytest.fixture(scope="module")
def server(request, start_server):
    """The test module's server, started once per module (and per variant).

    Its ServerConfig fields are what the module's server_fields() returns; its parameters name
    fixtures (media_dir ...) or `variant`, the SERVER_VARIANTS entry in use. A server with the
    rdma transport must have its NIXL lane up.
    """
    make = request.module.server_fields
    args = {name: request.param if name == "variant" else request.getfixturevalue(name)
            for name in inspect.signature(make).parameters}
    fields = make(**args)
    srv = start_server(**fields)
    if fields.get("transport") == "rdma":
        assert srv.server.rdma.ready, srv.server.rdma.reason
    return srv


# --------------------------------------------------------------------------------------------
# Nothing left in /dev/shm
# --------------------------------------------------------------------------------------------


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


@pytest.fixture
def no_shm_leak():
    """Fails the test if it leaves a new smg-fast segment in /dev/shm.

    Segments a live server keeps ready in its pool are not leaks.
    """
    before = shm_files()
    yield
    deadline = time.monotonic() + 30.0  # a bound for a loaded host; a clean test waits 0 s
    while True:  # a pool may be between creating a segment and listing it as ready
        leaked = shm_files() - before - pool_ready()
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"shm segments leaked: {sorted(leaked)}"
