"""The RDMA lane with real NIXL: UCX moves the bytes DRAM to DRAM between two processes over
loopback. An exporter runs in a child process (smg_fast.bench.rdma_peer, or the real server); the
puller runs here. Every wait is bounded."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

from smg_fast import rdma
from smg_fast.rdma.nixl import NIXL_MODULES

# Checked without importing NIXL: its libraries stay out of this process until a test needs them.
if not any(importlib.util.find_spec(m.split(".")[0]) for m in NIXL_MODULES):
    pytest.skip("NIXL is not installed (pip install --no-deps nixl-cu12==1.5.1)",
                allow_module_level=True)

pytest.importorskip("grpc")

from test_server_process import free_port, wait_serving  # noqa: E402

from smg_fast._proto import tensor_pb2  # noqa: E402
from smg_fast.bench.rdma_peer import PeerProcess, payload  # noqa: E402
from smg_fast.client import Client  # noqa: E402
from smg_fast.rdma import DescriptorError, Puller, PullError, StaleSlotError  # noqa: E402

MiB = 1 << 20


@pytest.fixture
def peers():
    started: list[PeerProcess] = []

    def factory(**opts: object) -> PeerProcess:
        p = PeerProcess(**opts)
        started.append(p)
        return p

    yield factory
    for p in started:
        p.close()


@pytest.fixture(scope="module")
def puller():
    with Puller(slots=4, slot_bytes=32 * MiB, timeout_s=10) as p:
        yield p


@pytest.mark.parametrize("op", ["export", "copy_in"])
def test_pull_is_exact_and_frees_the_slot(peers, puller, op):
    peer = peers(slots=2, slot_bytes=32 * MiB)
    for nbytes in (0, 1, 4097, 24 * MiB):
        got = puller.pull(peer.export(nbytes, seed=nbytes, op=op))
        assert got.dtype == np.uint8 and np.array_equal(got, payload(nbytes, nbytes))
        del got
    stats = peer.wait_stats(lambda s: s["in_use"] == 0)
    assert stats["in_use"] == 0 and stats["freed"] == 4 and stats["reaped"] == 0


def test_results_hold_landing_slots_until_dropped(peers):
    peer = peers(slots=4, slot_bytes=MiB)
    with Puller(slots=2, slot_bytes=MiB) as p:
        kept = [p.pull(peer.export(1000, seed=i)) for i in range(3)]  # third: overflow buffer
        assert p.stats()["landing_free"] == 0 and p.stats()["overflow"] == 1
        assert all(np.array_equal(a, payload(1000, i)) for i, a in enumerate(kept))
        del kept
        assert p.stats()["landing_free"] == 2
        view = p.pull(peer.export(1000, seed=9))[10:20]  # a view keeps the slot too
        assert p.stats()["landing_free"] == 1
        assert np.array_equal(view, payload(1000, 9)[10:20])
        del view
        assert p.stats()["landing_free"] == 2


def test_typed_tensor_cast_and_torch(peers, puller):
    torch = pytest.importorskip("torch")
    peer = peers(slots=2, slot_bytes=MiB)
    handle = peer.export(4 * 6 * 2, seed=5)  # 48 bytes = 24 bfloat16 values
    td = tensor_pb2.TensorData(shape=[4, 6], dtype="bfloat16", remote=handle)
    bits = payload(48, 5).view(np.uint16).reshape(4, 6)
    got = puller.pull(td, as_torch=True)
    assert got.dtype == torch.bfloat16 and torch.equal(got.view(torch.int16),
                                                       torch.from_numpy(bits.view(np.int16)))
    td2 = tensor_pb2.TensorData(shape=[4, 6], dtype="bfloat16", remote=peer.export(48, seed=5))
    as_f32 = puller.pull(td2, cast="float32")
    assert np.array_equal(as_f32, (bits.astype(np.uint32) << 16).view(np.float32))
    td3 = tensor_pb2.TensorData(shape=[5, 6], dtype="bfloat16", remote=peer.export(48, seed=5))
    with pytest.raises(DescriptorError):  # shape does not match the bytes
        puller.pull(td3)


def test_recycled_slot_is_detected_not_returned(peers, puller):
    peer = peers(slots=1, slot_bytes=MiB)
    r1 = peer.cmd(op="export", nbytes=5000, seed=1)
    peer.cmd(op="free", key=r1["key"])
    fresh = peer.export(5000, seed=2)  # the same slot, a new generation
    old = tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, nbytes=5000,
                                        descriptor=bytes.fromhex(r1["descriptor"]))
    with pytest.raises(StaleSlotError, match="generation"):
        puller.pull(old)
    assert np.array_equal(puller.pull(fresh), payload(5000, 2))


_KILLED_PULLER = textwrap.dedent("""
    import os, signal, sys
    from smg_fast._proto import tensor_pb2
    from smg_fast.rdma import TRANSPORT, Puller
    p = Puller(slots=1, slot_bytes=1 << 20)
    # Die between the READ and the notification that would free the exporter's slot.
    p._notify = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
    h = tensor_pb2.RemoteTensorHandle(transport=TRANSPORT, nbytes=int(sys.argv[2]),
                                      descriptor=bytes.fromhex(sys.argv[1]))
    p.pull(h)
""")


def test_killed_puller_leaves_a_slot_the_ttl_reaps(peers, puller):
    peer = peers(slots=1, slot_bytes=MiB, ttl_s=1.5)
    r = peer.cmd(op="export", nbytes=100_000, seed=3)
    child = subprocess.run([sys.executable, "-c", _KILLED_PULLER, r["descriptor"], "100000"],
                           timeout=60)
    assert child.returncode == -signal.SIGKILL
    stats = peer.cmd(op="stats")
    assert stats["in_use"] == 1 and stats["reaped"] == 0
    assert peer.cmd(op="export", nbytes=10, seed=0) == {"refused": "arena_full"}
    stats = peer.wait_stats(lambda s: s["reaped"] == 1, timeout=10)
    assert stats["reaped"] == 1 and stats["in_use"] == 0
    assert np.array_equal(puller.pull(peer.export(2000, seed=4)), payload(2000, 4))


def test_exporter_restart_refreshes_metadata(peers, puller):
    port = free_port()
    first = peers(port=port, slots=2, slot_bytes=MiB)
    assert np.array_equal(puller.pull(first.export(3000, seed=1)), payload(3000, 1))
    orphan = first.export(3000, seed=2)
    first.kill()
    second = peers(port=port, slots=2, slot_bytes=MiB)
    assert second.name != first.name
    assert np.array_equal(puller.pull(second.export(3000, seed=3)), payload(3000, 3))
    with pytest.raises(StaleSlotError, match="restarted"):  # the old exporter's slot is gone
        puller.pull(orphan)
    assert np.array_equal(puller.pull(second.export(3000, seed=4)), payload(3000, 4))


def test_dead_exporter_is_an_error_not_a_crash(peers):
    peer = peers(slots=2, slot_bytes=MiB)
    with Puller(slots=1, slot_bytes=MiB, timeout_s=5) as p:
        assert np.array_equal(p.pull(peer.export(100, seed=1)), payload(100, 1))
        handle = peer.export(100, seed=2)
        peer.kill()
        t0 = time.monotonic()
        with pytest.raises(PullError):
            p.pull(handle)
        assert time.monotonic() - t0 < 15
        assert p.stats()["landing_free"] == 1  # nothing held by the failed pull


def test_64_pulls_in_flight_from_4_threads(peers, puller):
    peer = peers(slots=64, slot_bytes=MiB)
    handles = [peer.export(200_000 + i, seed=i, op="copy_in" if i % 2 else "export")
               for i in range(64)]
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(t, 64, 4):
                got = puller.pull(handles[i])
                assert np.array_equal(got, payload(200_000 + i, i)), i
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors[:3]
    stats = peer.wait_stats(lambda s: s["in_use"] == 0)
    assert stats["in_use"] == 0 and stats["freed"] == 64


def test_pull_async_keeps_the_loop_running(peers, puller):
    peer = peers(slots=2, slot_bytes=32 * MiB)
    handle = peer.export(24 * MiB, seed=6)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        got = await puller.pull_async(handle)
        task.cancel()
        return got, ticks

    got, ticks = asyncio.run(main())
    assert np.array_equal(got, payload(24 * MiB, 6)) and ticks > 1


def test_bad_handles_and_unreachable_exporter(puller):
    with pytest.raises(DescriptorError):
        puller.pull(tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, descriptor=b"junk",
                                                  nbytes=4))
    with pytest.raises(DescriptorError, match="transport"):
        puller.pull(tensor_pb2.RemoteTensorHandle(transport="tcp", descriptor=b"{}", nbytes=4))
    desc = rdma.Descriptor(agent="nobody", host="127.0.0.1", port=free_port(), addr=4096,
                           frame_len=80, nbytes=4, generation=1, key="k")
    with pytest.raises(PullError, match="cannot reach"):
        puller.pull(tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT,
                                                  descriptor=desc.encode(), nbytes=4))


def test_pin_memory_without_cuda_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: pinned memory works")
    def notifiers() -> int:
        return sum(t.name == "smg-fast-rdma-notifier" for t in threading.enumerate())

    before = notifiers()
    for _ in range(2):
        with pytest.raises(ValueError, match="pin_memory"):
            Puller(slots=1, slot_bytes=MiB, pin_memory=True)
    assert notifiers() == before  # a failed construction leaves no agent or thread behind


# ---- the server's rdma transport ----


@pytest.fixture(scope="module")
def rdma_server(tmp_path_factory):
    """``python -m smg_fast.server --transport rdma`` in its own process; it must exit 0 after
    SIGTERM (drain with leases out, then close NIXL cleanly)."""
    port, metrics = free_port(), free_port()
    log = tmp_path_factory.mktemp("rdma_server") / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "smg_fast.server", "--port", str(port), "--transport", "rdma",
             "--rdma-listen-port", "0", "--rdma-slots", "2", "--rdma-slot-mb", "64",
             "--model", "qwen2_vl=qwen2_vl", "--model", "kimi=kimi_k25", "--workers", "2",
             "--pixel-cache-mb", "256", "--metrics-port", str(metrics),
             "--drain-timeout-s", "3"], stderr=err)
    server = types.SimpleNamespace(target=f"127.0.0.1:{port}", proc=proc, metrics=metrics)
    try:
        wait_serving(server.target, proc)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
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

    deadline = time.monotonic() + 10  # slots of earlier tests are freed by late notifications
    while _metric(rdma_server.metrics, "smg_fast_rdma_in_use") and time.monotonic() < deadline:
        time.sleep(0.05)

    from smg_fast._proto import preprocessor_pb2 as pb
    from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
    from smg_fast.tensors import read_tensor

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
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "smg_fast.server", "--port", str(port),
                             "--transport", "rdma", "--rdma-listen-port", "0",
                             "--rdma-slot-mb", "64"], stderr=subprocess.DEVNULL)
    try:
        target = f"127.0.0.1:{port}"
        wait_serving(target, proc)
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
    """A NIXL whose import aborts the process, or fails: the preflight child reports it, the
    server keeps serving, rdma items go by shm and are counted with the reason."""
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
    from smg_fast.rdma import Puller
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
    """Pullers SIGKILLed at random points of their pull loop: the server keeps serving, and every
    slot they held comes back (TTL) so the arena is whole again."""
    import random

    port, metrics = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "smg_fast.server", "--port", str(port), "--transport", "rdma",
         "--rdma-listen-port", "0", "--rdma-slots", "4", "--rdma-slot-mb", "8",
         "--rdma-slot-ttl-s", "2", "--metrics-port", str(metrics)], stderr=subprocess.DEVNULL)
    img = tmp_path / "img.jpg"
    img.write_bytes(small_jpegs["hubble"])
    target = f"127.0.0.1:{port}"
    rng = random.Random(1)
    try:
        wait_serving(target, proc)
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
        deadline = time.monotonic() + 15
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


def test_bad_handle_does_not_break_concurrent_pulls(peers):
    """A handle outside the exporter's memory fails alone: it must not make the puller drop and
    refetch the connection that concurrent valid pulls are using."""
    peer = peers(slots=8, slot_bytes=MiB)
    good = peer.cmd(op="export", nbytes=1000, seed=1)
    desc = rdma.Descriptor.decode(bytes.fromhex(good["descriptor"]))
    outside = dataclasses.replace(desc, addr=desc.addr + (1 << 40), key="bogus")
    bad = tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, nbytes=1000,
                                        descriptor=outside.encode())
    with Puller(slots=4, slot_bytes=MiB) as p:
        assert np.array_equal(p.pull(peer.export(1000, seed=1)), payload(1000, 1))
        errors: list[BaseException] = []
        stop = threading.Event()

        def hammer() -> None:
            while not stop.is_set():
                with pytest.raises(PullError, match="refused"):
                    p.pull(bad)

        def valid(t: int) -> None:
            try:
                for i in range(10):
                    got = p.pull(peer.export(5000, seed=100 * t + i))
                    assert np.array_equal(got, payload(5000, 100 * t + i))
                    del got
            except BaseException as exc:
                errors.append(exc)

        bad_thread = threading.Thread(target=hammer)
        bad_thread.start()
        threads = [threading.Thread(target=valid, args=(t,)) for t in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        stop.set()
        bad_thread.join(60)
        assert not errors, errors[:3]
        assert p.stats()["refreshes"] == 0


def test_silent_metadata_connections_do_not_stall_the_exporter(peers):
    import socket

    peer = peers(slots=2, slot_bytes=MiB)
    idle = [socket.create_connection(("127.0.0.1", peer.port)) for _ in range(3)]
    try:
        with Puller(slots=1, slot_bytes=MiB, timeout_s=5, metadata_timeout_s=1) as p:
            assert np.array_equal(p.pull(peer.export(100, seed=7)), payload(100, 7))
        assert peer.wait_stats(lambda s: s["in_use"] == 0)["in_use"] == 0
    finally:
        for s in idle:
            s.close()


def test_unresponsive_exporter_does_not_hold_up_other_peers(peers):
    """A pull whose exporter never answers its metadata request must not block a pull over an
    existing connection to another exporter."""
    import socket

    peer = peers(slots=2, slot_bytes=MiB)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    dead = rdma.Descriptor(agent="silent", host="127.0.0.1", port=silent.getsockname()[1],
                           addr=4096, frame_len=80, nbytes=4, generation=1, key="k")
    dead_handle = tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, descriptor=dead.encode(),
                                                nbytes=4)
    done: dict[str, float] = {}
    with Puller(slots=2, slot_bytes=MiB, metadata_timeout_s=3) as p:
        assert np.array_equal(p.pull(peer.export(100, seed=1)), payload(100, 1))

        def stuck() -> None:
            with pytest.raises(PullError):
                p.pull(dead_handle)
            done["stuck"] = time.monotonic()

        th = threading.Thread(target=stuck)
        th.start()
        time.sleep(0.2)  # the stuck pull now waits for metadata that never comes
        assert np.array_equal(p.pull(peer.export(100, seed=2)), payload(100, 2))
        done["healthy"] = time.monotonic()
        th.join(30)
    silent.close()
    assert done["healthy"] < done["stuck"]


def test_dropping_results_inside_a_collection_never_deadlocks(peers):
    """Results give their landing slot back from __del__, which can run in a garbage collection
    started while the same thread holds the puller's locks: it must take none."""
    import gc

    peer = peers(slots=2, slot_bytes=MiB)
    with Puller(slots=2, slot_bytes=MiB) as p:
        arr = p.pull(peer.export(100, seed=1))
        cycle: list = [arr]
        cycle.append(cycle)
        del arr

        def collect_under_locks() -> None:
            nonlocal cycle
            with p._pool_lock, p._lock:
                cycle = None
                gc.collect()

        th = threading.Thread(target=collect_under_locks, daemon=True)
        th.start()
        th.join(10)
        assert not th.is_alive(), "deadlock: __del__ took a lock its own thread held"
        assert p.stats()["landing_free"] == 2


def test_closed_puller_and_oversized_handles(peers):
    peer = peers(slots=2, slot_bytes=MiB)
    p = Puller(slots=1, slot_bytes=MiB, max_bytes=1000)
    handle = peer.export(2000, seed=1)
    with pytest.raises(DescriptorError, match="max_bytes"):
        p.pull(handle)
    p.close()
    p.close()  # idempotent
    with pytest.raises(rdma.RdmaError, match="closed"):
        p.pull(peer.export(100, seed=2))


_UNCLOSED = textwrap.dedent("""
    import sys
    from smg_fast._proto import tensor_pb2
    from smg_fast.rdma import TRANSPORT, Puller

    def pull(kept):
        p = Puller(slots=1, slot_bytes=1 << 20)
        h = tensor_pb2.RemoteTensorHandle(transport=TRANSPORT, nbytes=int(sys.argv[2]),
                                          descriptor=bytes.fromhex(sys.argv[1]))
        out = p.pull(h)
        if kept:
            globals()["kept"] = (p, out)   # alive at interpreter exit
        return int(out[0])                 # else collected on return, never closed

    pull(sys.argv[3] == "global")
""")


@pytest.mark.parametrize("where", ["local", "global"])
def test_unclosed_puller_exits_cleanly(peers, where):
    """NIXL aborts a process that destroys an agent with connected peers; pullers nobody closed
    (collected early, or alive at exit) must close themselves."""
    peer = peers(slots=2, slot_bytes=MiB)
    r = peer.cmd(op="export", nbytes=100, seed=1)
    child = subprocess.run([sys.executable, "-c", _UNCLOSED, r["descriptor"], "100", where],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]


# ---- hostile tenants (issue 8) ----


def _handle(desc: rdma.Descriptor) -> tensor_pb2.RemoteTensorHandle:
    return tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, nbytes=desc.nbytes,
                                         descriptor=desc.encode())


def _neighbour_keys(key: str) -> list[str]:
    """What an attacker tries from its own key: the counters next to it, and its own key with
    one character changed."""
    out = []
    head, _, tail = key.rpartition(".")
    if tail.isdigit():
        out += [f"{head}.{int(tail) + d}" for d in (-3, -2, -1, 1, 2, 3)]
    out += [key[:-1] + c for c in "0123456789abcdef" if c != key[-1]]
    return out


def test_forged_handles_never_hand_out_or_keep_another_tenants_bytes(peers):
    """A tenant holding only its own handle forges handles for the neighbouring slot (its address
    minus one slot, generations and keys next to its own). NIXL does READ the victim's frame (a
    peer speaking NIXL directly could keep it: no confidentiality, see the README), but our
    puller refuses every one without revealing the generation, and wipes the landing slot: the
    victim's bytes are neither returned nor left behind."""
    peer = peers(slots=2, slot_bytes=MiB)
    victim = rdma.Descriptor.decode(bytes(peer.export(5000, seed=11).descriptor))
    mine = rdma.Descriptor.decode(bytes(peer.export(5000, seed=12).descriptor))
    secret = payload(5000, 11)
    forged = [dataclasses.replace(mine, addr=victim.addr if victim.addr != mine.addr
                                  else mine.addr + MiB, generation=mine.generation + d, key=k)
              for d in (-3, -2, -1, 1, 2, 3) for k in _neighbour_keys(mine.key)[:6]]
    with Puller(slots=1, slot_bytes=MiB, timeout_s=10) as p:
        landing = p._pool[:victim.frame_len]
        for desc in forged:
            with pytest.raises(StaleSlotError) as info:
                p.pull(_handle(desc))
            assert str(victim.generation) not in str(info.value)
            assert p.stats()["landing_free"] == 1
            assert not np.array_equal(landing[64:64 + 5000], secret)
            assert np.count_nonzero(landing) == 0
        assert p.stats()["stale"] == len(forged)
        assert np.array_equal(p.pull(_handle(victim)), secret)  # the victim's own handle works
        assert np.array_equal(p.pull(_handle(mine)), payload(5000, 12))
    assert victim.key != mine.key and len(mine.key) == 32  # 128-bit random hex


def test_forged_and_early_notifications_free_nothing(peers):
    """Notifications are the free path: one naming a key that is not a lease's (guessed from the
    sender's own key) or a lease still being written frees nothing, and each is counted."""
    peer = peers(slots=4, slot_bytes=MiB)
    victim = peer.export(3000, seed=21)
    writing = peer.cmd(op="lease", nbytes=3000, seed=22)["key"]  # leased, not committed
    with Puller(slots=2, slot_bytes=MiB, timeout_s=10) as attacker:
        own = peer.export(3000, seed=23)
        own_key = rdma.Descriptor.decode(bytes(own.descriptor)).key
        assert np.array_equal(attacker.pull(own), payload(3000, 23))  # connects the notifier
        peer.wait_stats(lambda s: s["in_use"] == 2)
        guesses = _neighbour_keys(own_key) + [writing]
        for key in guesses:
            attacker._notify(peer.name, key)
        stats = peer.wait_stats(lambda s: s.get("bad_notifications", 0) >= len(guesses))
    assert stats["in_use"] == 2  # the victim's slot and the one being written
    assert stats["bad_notifications"] == len(guesses) and stats["refused_free"] == 1
    committed = peer.cmd(op="commit", key=writing)
    with Puller(slots=2, slot_bytes=MiB, timeout_s=10) as p:
        assert np.array_equal(p.pull(victim), payload(3000, 21))
        late = tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, nbytes=3000,
                                             descriptor=bytes.fromhex(committed["descriptor"]))
        assert np.array_equal(p.pull(late), payload(3000, 22))
    assert peer.wait_stats(lambda s: s["in_use"] == 0)["in_use"] == 0


def test_idle_and_slow_metadata_peers_do_not_lock_out_pullers(peers):
    """40 idle connections and 4 that drip a request byte by byte hold the metadata port; a new
    puller still gets the metadata and pulls (the oldest connections make room)."""
    import socket

    peer = peers(slots=2, slot_bytes=MiB)
    idle = [socket.create_connection(("127.0.0.1", peer.port), timeout=5) for _ in range(40)]
    slow = [socket.create_connection(("127.0.0.1", peer.port), timeout=5) for _ in range(4)]
    stop = threading.Event()

    def drip() -> None:
        for i in range(40):  # a valid request prefix, one byte at a time (bounded)
            for s in slow:
                try:
                    s.send(b"SMGMETA1"[i % 7:i % 7 + 1])
                except OSError:
                    pass
            if stop.wait(0.2):
                return

    dripper = threading.Thread(target=drip)
    dripper.start()
    try:
        for seed in (31, 32):  # two fresh pullers, each fetching the metadata anew
            with Puller(slots=1, slot_bytes=MiB, timeout_s=10, metadata_timeout_s=5) as p:
                assert np.array_equal(p.pull(peer.export(100, seed=seed)), payload(100, seed))
        stats = peer.cmd(op="stats")
        assert stats["metadata_served"] == 2 and stats["metadata_dropped"] >= 36
    finally:
        stop.set()
        dripper.join(30)
        for s in idle + slow:
            s.close()


class _StallingAgent:
    """A NIXL agent whose transfers look in progress while ``stall`` is set (a READ that times
    out), and report their real state afterwards."""

    def __init__(self, agent: object) -> None:
        self._agent = agent
        self.stall = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._agent, name)

    def transfer(self, handle: object) -> str:
        state = self._agent.transfer(handle)
        return "PROC" if self.stall else state

    def check_xfer_state(self, handle: object) -> str:
        state = self._agent.check_xfer_state(handle)
        return "PROC" if self.stall else state


def test_timed_out_reads_give_their_landing_slots_back(peers):
    """A READ that timed out quarantines its buffer (a late write could land); once the transfer
    reports DONE the slot returns to the pool, so later pulls do not overflow forever."""
    peer = peers(slots=8, slot_bytes=MiB)
    with Puller(slots=2, slot_bytes=MiB, timeout_s=10) as p:
        stalling = p._agent = _StallingAgent(p._agent)
        first = p.pull(peer.export(1000, seed=41))  # connected before anything stalls
        assert np.array_equal(first, payload(1000, 41))
        del first
        stalling.stall = True
        for seed in (42, 43, 44):  # two landing slots and one one-off buffer
            with pytest.raises(PullError, match="timed out"):
                p.pull(peer.export(1000, seed=seed), timeout_s=0.3)
        assert p.stats()["landing_free"] == 0  # still quarantined: the READs look in flight
        stalling.stall = False
        stats = p.stats()
        assert (stats["landing_free"], stats["reclaimed"], stats["timeouts"]) == (2, 3, 3)
        overflow = stats["overflow"]
        for seed in (45, 46):
            assert np.array_equal(p.pull(peer.export(1000, seed=seed)), payload(1000, seed))
        assert p.stats()["overflow"] == overflow


def test_foreign_transport_is_refused_by_name(peers, puller):
    """smg's own RDMA handles say transport "nixl" with a binary descriptor: ours say
    "nixl/smg-fast-v1", and each refuses the other's by name instead of misparsing it."""
    from smg_fast.tensors import read_tensor

    assert rdma.TRANSPORT == "nixl/smg-fast-v1"
    peer = peers(slots=2, slot_bytes=MiB)
    ours_handle = peer.export(100, seed=51)
    assert ours_handle.transport == "nixl/smg-fast-v1"
    foreign = tensor_pb2.RemoteTensorHandle(transport="nixl", nbytes=100,
                                            descriptor=b"SMGRDMA1" + bytes(40))
    with pytest.raises(rdma.ForeignHandleError, match="'nixl'") as info:
        puller.pull(foreign)
    assert info.value.transport == "nixl"
    with pytest.raises(rdma.ForeignHandleError):
        read_tensor(tensor_pb2.TensorData(shape=[100], dtype="uint8", remote=foreign),
                    puller=puller)
    assert np.array_equal(puller.pull(ours_handle), payload(100, 51))


_CONNECT_FLOOD = textwrap.dedent("""
    import socket, sys
    port, total = int(sys.argv[1]), int(sys.argv[2])
    held = []
    print("flooding", flush=True)
    for i in range(total):  # idle connections in a burst, the newest 100 held open
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            pass
        if len(held) > 100:
            held.pop(0).close()
    print("done", flush=True)
    sys.stdin.read()
""")


def test_connect_flood_from_the_pullers_address_does_not_starve_a_puller(peers):
    """Every local puller shares 127.0.0.1 with a local flood of idle connects (8 per address):
    fresh pullers fetching metadata in the middle of the flood still get it and pull."""
    peer = peers(slots=2, slot_bytes=MiB)
    flood = subprocess.Popen([sys.executable, "-c", _CONNECT_FLOOD, str(peer.port), "2000"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert flood.stdout.readline().strip() == "flooding"
        for seed in (61, 62, 63):
            with Puller(slots=1, slot_bytes=MiB, timeout_s=10, metadata_timeout_s=5) as p:
                assert np.array_equal(p.pull(peer.export(100, seed=seed)), payload(100, seed))
        assert flood.stdout.readline().strip() == "done"
        stats = peer.cmd(op="stats")
        assert stats["metadata_served"] >= 3 and stats["metadata_dropped"] >= 100
    finally:
        flood.stdin.close()
        flood.wait(30)
        flood.stdout.close()


class _StuckNotifications:
    """A NIXL agent whose get_new_notifs blocks while ``stuck`` is set (a NIXL call that does
    not return), and that counts deregistrations."""

    def __init__(self, agent: object) -> None:
        self._agent = agent
        self.stuck = threading.Event()
        self.inside = threading.Event()
        self.gate = threading.Event()
        self.deregistered = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._agent, name)

    def get_new_notifs(self) -> dict:
        if self.stuck.is_set():
            self.inside.set()
            self.gate.wait(60)
        return self._agent.get_new_notifs()

    def deregister_memory(self, reg: object) -> None:
        self.deregistered += 1
        self._agent.deregister_memory(reg)


def test_close_never_frees_what_a_stuck_exporter_thread_uses():
    """close() waits a bounded time; an exporter thread still inside a NIXL call keeps its
    sockets and registration until it ends, and then releases them itself."""
    exporter = rdma.Exporter(slots=1, slot_bytes=MiB, ttl_s=30, listen_port=0)
    agent = exporter._agent = _StuckNotifications(exporter._agent)
    try:
        agent.stuck.set()
        assert agent.inside.wait(10)
        t0 = time.monotonic()
        exporter.close(join_timeout_s=0.2)
        assert time.monotonic() - t0 < 5
        assert exporter._thread.is_alive()
        assert agent.deregistered == 0 and exporter._sock.fileno() != -1
    finally:
        agent.gate.set()
    exporter._thread.join(30)
    assert not exporter._thread.is_alive()
    assert agent.deregistered == 1 and exporter._sock.fileno() == -1
