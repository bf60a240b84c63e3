"""file:// URLs cannot be raced out of the allowed directory.

A directory swapped for a symlink between check and open never serves a file outside it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from blake3 import blake3

pytest.importorskip("grpc")

import grpc  # noqa: E402

from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.client import Client  # noqa: E402
from smg_fast.server import inputs  # noqa: E402
from smg_fast.server.request_error import RequestError  # noqa: E402

# ---- file:// race ----

_SWAPPER = textwrap.dedent("""
    import os, sys
    root, outside, stop = sys.argv[1:4]
    d, real = os.path.join(root, "d"), os.path.join(root, "d.real")
    while not os.path.exists(stop):
        os.rename(d, real)
        os.symlink(outside, d)
        os.unlink(d)
        os.rename(real, d)
""")


@pytest.fixture
def racing_dir(tmp_path, small_jpegs):
    """allowed/d/img.jpg, and outside/img.jpg.

    A process keeps swapping allowed/d for a symlink to outside until the test ends."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "d").mkdir(parents=True)
    outside.mkdir()
    (allowed / "d" / "img.jpg").write_bytes(small_jpegs["rocket"])
    (outside / "img.jpg").write_bytes(small_jpegs["chelsea"])
    stop = tmp_path / "stop"
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(allowed), str(outside),
                                str(stop)])
    try:
        yield allowed, blake3(small_jpegs["chelsea"]).digest()
    finally:
        stop.touch()
        try:
            swapper.wait(30)
        except subprocess.TimeoutExpired:
            swapper.kill()
            swapper.wait()


def _resolve_many(allowed, secret_digest, n: int) -> tuple[int, int]:
    url = f"file://{allowed}/d/img.jpg"
    served = leaked = 0
    for _ in range(n):
        try:
            data = inputs.resolve_url(0, url, [str(allowed)], 1 << 20)
        except RequestError:
            continue
        served += 1
        leaked += blake3(data).digest() == secret_digest
    return served, leaked


@pytest.mark.parametrize("resolver", ["openat2", "walk"])
def test_file_url_race_never_leaves_the_allowed_dir(racing_dir, resolver, monkeypatch):
    allowed, secret = racing_dir
    if resolver == "walk":
        monkeypatch.setitem(inputs._openat2_state, "missing", True)
    served, leaked = _resolve_many(allowed, secret, 3000)
    assert leaked == 0
    assert served > 0  # the race left some lookups through: the test exercised the open


def test_file_url_race_through_the_server(racing_dir, start_server):
    allowed, secret = racing_dir
    srv = start_server(allowed_media_dirs=[str(allowed)])
    served = tries = 0
    with Client(srv.target, timeout=30) as c:
        # at least 150 tries, and on until one lands while the directory is real (a loaded
        # host can leave the swapper mid-swap through many tries)
        while tries < 150 or (served == 0 and tries < 3000):
            tries += 1
            req = pb.PreprocessRequest(items=[pb.MediaItem(url=f"file://{allowed}/d/img.jpg")],
                                       transport="inline")
            try:
                resp = c._stub.Preprocess(req, timeout=30)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
                continue
            served += 1
            assert resp.items[0].content_hash != secret
    assert served > 0
