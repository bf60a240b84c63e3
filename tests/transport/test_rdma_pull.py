"""RDMA pulls with real NIXL, the happy path and the puller's own resources.

Exact bytes, landing slots held by results and given back, casts, concurrency, asyncio, and clean
exits. An exporter runs in a child process (smg_fast.testing.rdma_peer); the puller runs here.
Every wait is bounded."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast._proto import tensor_pb2
from smg_fast.testing.rdma_peer import payload
from smg_fast.transport import rdma
from smg_fast.transport.rdma import DescriptorError, Puller


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


def test_dropping_results_inside_a_collection_never_deadlocks(peers):
    """Dropping results inside a garbage collection never deadlocks the puller.

    Results give their landing slot back from __del__, which can run in a garbage collection started
    while the same thread holds the puller's locks: it must take none."""
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
    from smg_fast.transport.rdma import TRANSPORT, Puller

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
    """NIXL aborts a process that destroys an agent with connected peers.

    Pullers nobody closed (collected early, or alive at exit) must close themselves."""
    peer = peers(slots=2, slot_bytes=MiB)
    r = peer.cmd(op="export", nbytes=100, seed=1)
    child = subprocess.run([sys.executable, "-c", _UNCLOSED, r["descriptor"], "100", where],
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
