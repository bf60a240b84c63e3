"""Hostile tenants on the RDMA lane, with real NIXL, never reach another tenant's bytes.

Forged handles and notifications, foreign transports, and idle, slow or flooding metadata peers
never hand out another tenant's bytes, free a slot early, or lock a puller out. Every wait is
bounded.
"""

from __future__ import annotations

import dataclasses
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
from smg_fast.transport import rdma
from smg_fast.transport.rdma import Puller, PullError, StaleSlotError


def _handle(desc: rdma.Descriptor) -> tensor_pb2.RemoteTensorHandle:
    return tensor_pb2.RemoteTensorHandle(transport=rdma.TRANSPORT, nbytes=desc.nbytes,
                                         descriptor=desc.encode())


def _neighbour_keys(key: str) -> list[str]:
    """What an attacker tries from its own key.

    The counters next to it, and its own key with one character changed."""
    out = []
    head, _, tail = key.rpartition(".")
    if tail.isdigit():
        out += [f"{head}.{int(tail) + d}" for d in (-3, -2, -1, 1, 2, 3)]
    out += [key[:-1] + c for c in "0123456789abcdef" if c != key[-1]]
    return out


def test_forged_handles_never_hand_out_or_keep_another_tenants_bytes(peers):
    """Forged handles never hand out or leave behind another tenant's bytes.

    A tenant holding only its own handle forges handles for the neighbouring slot (its address minus
    one slot, generations and keys next to its own). NIXL does READ the victim's frame (a peer
    speaking NIXL directly could keep it: no confidentiality, see docs/security.md), but our puller
    refuses every one without revealing the generation, and wipes the landing slot: the victim's
    bytes are neither returned nor left behind."""
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
    """Notifications are the free path.

    One naming a key that is not a lease's (guessed from the sender's own key) or a lease still
    being written frees nothing, and each is counted."""
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


def test_foreign_transport_is_refused_by_name(peers, puller):
    """smg's own RDMA handles say transport "nixl" with a binary descriptor.

    Ours say "nixl/smg-fast-v1", and each refuses the other's by name instead of misparsing it."""
    from smg_fast.transport.tensors import read_tensor

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
    """An exporter that never answers does not hold up pulls from other exporters.

    A pull whose exporter never answers its metadata request must not block a pull over an existing
    connection to another exporter."""
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
    with Puller(slots=2, slot_bytes=MiB, metadata_timeout_s=120) as p:
        assert np.array_equal(p.pull(peer.export(100, seed=1)), payload(100, 1))

        def stuck() -> None:
            with pytest.raises(PullError):
                p.pull(dead_handle)
            done["stuck"] = time.monotonic()

        th = threading.Thread(target=stuck)
        th.start()
        silent.settimeout(60)
        waiting, _ = silent.accept()  # the stuck pull has connected: it now waits for metadata
        assert np.array_equal(p.pull(peer.export(100, seed=2)), payload(100, 2))
        done["healthy"] = time.monotonic()
        assert th.is_alive()  # the healthy pull finished while the stuck one still waited
        silent.close()  # the silent exporter goes away (a retry is refused) and hangs up:
        waiting.close()  # the stuck pull fails now
        th.join(60)
    assert done["healthy"] < done["stuck"]


def test_idle_and_slow_metadata_peers_do_not_lock_out_pullers(peers):
    """40 idle connections and 4 that drip a request byte by byte hold the metadata port.

    A new puller still gets the metadata and pulls (the oldest connections make room)."""
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
    """Every local puller shares 127.0.0.1 with a local flood of idle connects (8 per address).

    Fresh pullers fetching metadata in the middle of the flood still get it and pull."""
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
