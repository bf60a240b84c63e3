"""The server's rdma transport with real NIXL.

Exact at 1080p, falling back to inline when the arena is full or NIXL is broken, the client CLI, and
servers or pullers killed mid-flight. Real server processes on free loopback ports; every wait is
bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import types

import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast.client import Client
from smg_fast.testing.servers import ServerProcess, free_port
from smg_fast.transport.rdma import Puller, PullError


@pytest.fixture(scope="module")
def rdma_server(tmp_path_factory):
    """``python -m smg_fast.server --transport rdma`` in its own process.

    It must exit 0 after SIGTERM (drain with leases out, then close NIXL cleanly)."""
    metrics = free_port()
    log = tmp_path_factory.mktemp("rdma_server") / "stderr.log"
    with open(log, "w") as err:
        srv = ServerProcess(
            ["--transport", "rdma", "--rdma-listen-port", "0", "--rdma-slots", "2",
             "--rdma-caller-slots", "2",  # one caller may fill the arena (shares: elsewhere)
             "--rdma-slot-mb", "64", "--model", "qwen2_vl=qwen2_vl", "--model", "kimi=kimi_k25",
             "--workers", "2", "--pixel-cache-mb", "256", "--metrics-port", str(metrics),
             "--drain-timeout-s", "3"], stderr=err)
    server = types.SimpleNamespace(target=srv.target, proc=srv.proc, metrics=metrics)
    try:
        srv.wait()
        yield server
    finally:
        code = srv.stop(timeout=30)
    assert code == 0, log.read_text()[-2000:]


@pytest.fixture(scope="module")
def photo_1080p(real_images):
    import io

    im = real_images.rgb("astronaut").resize((1920, 1080))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=92)
    return buf.getvalue()


def test_server_rdma_is_exact_at_1080p(rdma_server, puller, photo_1080p, ours):
    target = rdma_server.target
    with Puller(slots=2, slot_bytes=64 * MiB) as big, Client(target, puller=big) as c:
        info = c.model_info()
        assert info["rdma_available"] and info["rdma_max_bytes"] >= 48 * MiB
        ref = ours("qwen2_vl")(photo_1080p)["pixel_values"]
        for _ in range(2):  # miss, then a pixel-cache hit (copy-in path)
            out = c.preprocess(photo_1080p, transport="rdma")
            assert out.items[0].transport == "rdma"
            assert np.array_equal(out.pixel_values, ref)
        bf16 = c.preprocess(photo_1080p, transport="rdma", dtype="bfloat16")
        assert bf16.items[0].transport == "rdma"
        ref16 = ours("qwen2_vl")(photo_1080p, dtype="bfloat16")["pixel_values"]
        assert np.array_equal(bf16.pixel_values, ref16)
        kimi = c.preprocess(photo_1080p, model="kimi", transport="rdma")
        assert np.array_equal(kimi.pixel_values, ours("kimi_k25")(photo_1080p)["pixel_values"])


def test_server_full_arena_falls_back_to_inline(rdma_server, small_jpegs, ours, puller):
    """Two slots, three unpulled handles: the third item goes inline (another host's caller)."""
    import grpc

    deadline = time.monotonic() + 120  # slots of earlier tests are freed by late notifications
    while _metric(rdma_server.metrics, "smg_fast_rdma_in_use"):
        assert time.monotonic() < deadline, "earlier tests' slots never came back"
        time.sleep(0.05)

    from smg_fast._proto import preprocessor_pb2 as pb
    from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
    from smg_fast.transport.tensors import read_tensor

    target = rdma_server.target
    jpeg = small_jpegs["chelsea"]
    req = pb.PreprocessRequest(items=[pb.MediaItem(data=jpeg)] * 3, transport="rdma")
    with grpc.insecure_channel(target) as ch:
        resp = pb_grpc.PreprocessorStub(ch).Preprocess(req, timeout=30)
    kinds = [it.transport for it in resp.items]
    assert kinds == ["rdma", "rdma", "inline"]
    ref = ours("qwen2_vl")(jpeg)["pixel_values"]
    for it in resp.items:
        assert np.array_equal(read_tensor(it.pixel_values, puller=puller), ref)


def test_server_killed_mid_flight_never_crashes_the_puller(photo_1080p, tmp_path):
    srv = ServerProcess(["--transport", "rdma", "--rdma-listen-port", "0", "--rdma-slot-mb", "64"],
                        stderr=subprocess.DEVNULL)
    proc, target = srv.proc, srv.target
    try:
        srv.wait()
        import grpc

        from smg_fast._proto import preprocessor_pb2 as pb
        from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc

        with grpc.insecure_channel(target) as ch:
            resp = pb_grpc.PreprocessorStub(ch).Preprocess(
                pb.PreprocessRequest(items=[pb.MediaItem(data=photo_1080p)], transport="rdma"),
                timeout=60)
        td = resp.items[0].pixel_values
        assert td.WhichOneof("payload") == "remote"
        proc.kill()
        proc.wait(10)
        with Puller(slots=1, slot_bytes=64 * MiB, timeout_s=5) as p:
            with pytest.raises(PullError):
                p.pull(td)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("api, reason", [
    ("import os\nos.abort()\n", "agent_failed"),  # a native library that kills its process
    ("raise ImportError('libnixl.so: cannot open shared object file')\n", "nixl_unavailable"),
])
def test_broken_nixl_disables_the_lane_not_the_server(tmp_path, start_server, small_jpegs, ours,
                                                      monkeypatch, api, reason):
    """A NIXL whose import aborts the process, or fails.

    The preflight child reports it, the server keeps serving, rdma items go by shm and are counted
    with the reason."""
    fake = tmp_path / "fake_nixl" / "nixl_cu12"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "_api.py").write_text(api)
    monkeypatch.setenv("PYTHONPATH", f"{fake.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    srv = start_server(transport="rdma")
    reg = srv.server.metrics.registry
    assert not srv.server.rdma.ready and srv.server.rdma.reason == reason
    with Client(srv.target, timeout=30) as c:
        assert not c.model_info()["rdma_available"]
        out = c.preprocess(small_jpegs["rocket"], transport="rdma")
    assert out.items[0].transport == "shm"
    assert np.array_equal(out.pixel_values, ours("qwen2_vl")(small_jpegs["rocket"])["pixel_values"])
    assert reg.get_sample_value("smg_fast_fallback_total", {"reason": reason, "used": "shm"}) == 1


def test_client_cli_pulls_and_exits_cleanly(rdma_server, small_jpegs, tmp_path):
    """The client CLI pulls over rdma, verifies against the in-process processor, exits 0."""
    target = rdma_server.target
    img = tmp_path / "rocket.jpg"
    img.write_bytes(small_jpegs["rocket"])
    cli = subprocess.run([sys.executable, "-m", "smg_fast.client", str(img), "--target", target,
                          "--transport", "rdma", "--verify"], capture_output=True, text=True,
                         timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert "transport rdma" in cli.stdout and "identical to in-process" in cli.stdout


_PULL_FOREVER = textwrap.dedent("""
    import sys
    from smg_fast.client import Client
    from smg_fast.transport.rdma import Puller
    data = open(sys.argv[2], "rb").read()
    with Puller(slots=2, slot_bytes=8 << 20) as p, Client(sys.argv[1], puller=p) as c:
        print("pulling", flush=True)
        while True:
            assert c.preprocess(data, transport="rdma").items[0].transport == "rdma"
""")


def _metric(port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_pullers_killed_at_random_moments(small_jpegs, tmp_path):
    """Pullers SIGKILLed at random points of their pull loop.

    The server keeps serving, and every slot they held comes back (TTL) so the arena is whole again.
    """
    import random

    metrics = free_port()
    srv = ServerProcess(["--transport", "rdma", "--rdma-listen-port", "0", "--rdma-slots", "4",
                         "--rdma-slot-mb", "8", "--rdma-slot-ttl-s", "2",
                         "--metrics-port", str(metrics)], stderr=subprocess.DEVNULL)
    proc, target = srv.proc, srv.target
    img = tmp_path / "img.jpg"
    img.write_bytes(small_jpegs["hubble"])
    rng = random.Random(1)
    try:
        srv.wait()
        for _ in range(4):
            child = subprocess.Popen([sys.executable, "-c", _PULL_FOREVER, target, str(img)],
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout.readline().strip() == "pulling"
            time.sleep(rng.uniform(0.05, 0.8))
            child.kill()
            child.wait(10)
            child.stdout.close()
        assert proc.poll() is None
        with Puller(slots=1, slot_bytes=8 * MiB) as p, Client(target, puller=p) as c:
            out = c.preprocess(img.read_bytes(), transport="rdma")
            assert out.items[0].transport == "rdma"
        deadline = time.monotonic() + 120  # the TTL (2 s) reaps what the killed pullers held
        while _metric(metrics, "smg_fast_rdma_in_use") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _metric(metrics, "smg_fast_rdma_in_use") == 0
        assert _metric(metrics, "smg_fast_rdma_leased_total") >= 4
    finally:
        proc.terminate()  # drains and unlinks what it owns
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
