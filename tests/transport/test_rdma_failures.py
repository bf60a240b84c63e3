"""RDMA failures with real NIXL.

Recycled slots, killed pullers, restarted or dead exporters, bad handles, stalled reads and a stuck
exporter thread are errors (or recoveries), never crashes, hangs or leaks. Exporters run in child
processes; every wait is bounded."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast._proto import tensor_pb2
from smg_fast.testing.rdma_peer import payload
from smg_fast.testing.servers import free_port
from smg_fast.transport import rdma
from smg_fast.transport.rdma import DescriptorError, Puller, PullError, StaleSlotError


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
    from smg_fast.transport.rdma import TRANSPORT, Puller
    p = Puller(slots=1, slot_bytes=1 << 20)
    # Die between the READ and the notification that would free the exporter's slot.
    p._notify = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
    h = tensor_pb2.RemoteTensorHandle(transport=TRANSPORT, nbytes=int(sys.argv[2]),
                                      descriptor=bytes.fromhex(sys.argv[1]))
    p.pull(h)
""")


def test_killed_puller_leaves_a_slot_the_ttl_reaps(peers, puller):
    """The TTL counts only once the stranded lease has been seen.

    The exporter's own reaper runs with a clock the test moves past the TTL, so a slow child start
    cannot expire it early."""
    ttl = 3600.0
    peer = peers(slots=1, slot_bytes=MiB, ttl_s=ttl)
    r = peer.cmd(op="export", nbytes=100_000, seed=3)
    child = subprocess.run([sys.executable, "-c", _KILLED_PULLER, r["descriptor"], "100000"],
                           timeout=120)
    assert child.returncode == -signal.SIGKILL
    stats = peer.cmd(op="stats")
    assert stats["in_use"] == 1 and stats["reaped"] == 0 and stats["freed"] == 0, stats
    assert peer.cmd(op="export", nbytes=10, seed=0) == {"refused": "arena_full"}
    peer.cmd(op="advance_reap_clock", seconds=ttl)  # the TTL has now passed, for the reaper only
    stats = peer.wait_stats(lambda s: s["reaped"] == 1, timeout=120)
    assert stats["reaped"] == 1 and stats["in_use"] == 0 and stats["freed"] == 0, stats
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


def test_bad_handle_does_not_break_concurrent_pulls(peers):
    """A handle outside the exporter's memory fails alone.

    It must not make the puller drop and refetch the connection that concurrent valid pulls are
    using."""
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


class _StallingAgent:
    """A NIXL agent wrapper whose transfers can stall, for READs that time out.

    Its transfers look in progress while ``stall`` is set (a READ that times out), and report their
    real state afterwards."""

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
    """A READ that timed out quarantines its buffer (a late write could land).

    Once the transfer reports DONE the slot returns to the pool, so later pulls do not overflow
    forever."""
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


class _StuckNotifications:
    """A NIXL agent wrapper whose notifications can hang, counting deregistrations.

    Its get_new_notifs blocks while ``stuck`` is set (a NIXL call that does not return); it counts
    deregistrations."""

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
    """close() waits a bounded time.

    An exporter thread still inside a NIXL call keeps its sockets and registration until it ends,
    and then releases them itself."""
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
