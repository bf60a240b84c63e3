"""The native RDMA slot arena on its own (no NIXL).

Leases, frames, generations, TTL, counters, copy-in, and concurrent use."""

from __future__ import annotations

import os
import struct
import threading

import numpy as np
import pytest

from smg_fast import _native
from smg_fast.transport.rdma.descriptor import Descriptor, check_frame
from smg_fast.transport.rdma.errors import DescriptorError, StaleSlotError

MiB = 1 << 20


def frame_of(arena, lease):
    return arena.view(lease["frame_offset"], lease["frame_len"])


def header(frame):
    return struct.unpack_from("<QIIQQQ", frame, 0)


def descriptor(arena, key, lease):
    return Descriptor(agent="a", host="127.0.0.1", port=1,
                      addr=arena.address + lease["frame_offset"], frame_len=lease["frame_len"],
                      nbytes=lease["payload_len"], generation=lease["generation"], key=key)


def test_frame_layout_and_counters():
    arena = _native.SlotArena(2, MiB, 30.0)
    assert arena.size == 2 * MiB and arena.max_payload == MiB - 72
    data = np.random.default_rng(0).integers(0, 256, 1001, dtype=np.uint8)
    lease = arena.lease("k1", data.nbytes)
    assert lease["frame_len"] == 64 + 1008 + 8 == _native.frame_bytes(1001)
    arena.view(lease["payload_offset"], data.nbytes)[:] = data
    assert arena.commit("k1")
    frame = frame_of(arena, lease)
    magic, version, _, gen, nbytes, khash = header(frame)
    assert (magic, version, gen, nbytes) == (_native.FRAME_MAGIC, 1, lease["generation"], 1001)
    assert khash == _native.key_hash("k1") != _native.key_hash("k2")
    assert struct.unpack_from("<Q", frame, 64 + 1008)[0] == lease["generation"]
    assert np.array_equal(frame[64:64 + 1001], data)
    check_frame(frame, descriptor(arena, "k1", lease))  # the frame a puller would accept
    c = arena.counters()
    assert (c["leased"], c["committed"], c["in_use"]) == (1, 1, 1)
    assert arena.free("k1") and not arena.free("k1")
    c = arena.counters()
    assert (c["freed"], c["unknown_free"], c["in_use"]) == (1, 1, 0)


def test_full_too_large_and_duplicate_keys():
    arena = _native.SlotArena(2, 64 * 1024, 30.0)
    assert arena.lease("a", 10) is not None and arena.lease("b", 10) is not None
    assert arena.lease("c", 10) is None  # full: refused, not blocking
    with pytest.raises(ValueError, match="does not fit a slot"):
        arena.lease("d", arena.max_payload + 1)
    assert arena.abort("a")  # the writer gives its uncommitted lease up
    with pytest.raises(ValueError, match="already holds"):
        arena.lease("b", 10)
    assert arena.lease("e", arena.max_payload) is not None  # exactly one slot's payload fits
    c = arena.counters()
    assert (c["full"], c["too_large"], c["leased"], c["in_use"]) == (1, 1, 3, 2)


def test_uncommitted_frame_never_validates():
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    lease = arena.lease("k", 100)
    with pytest.raises(StaleSlotError):
        check_frame(frame_of(arena, lease), descriptor(arena, "k", lease))


def test_recycled_slot_is_detected():
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    old = arena.lease("old", 500)
    arena.commit("old")
    stale_desc = descriptor(arena, "old", old)
    check_frame(frame_of(arena, old), stale_desc)
    arena.free("old")
    new = arena.lease("new", 300)
    arena.commit("new")
    assert new["slot"] == old["slot"] and new["generation"] != old["generation"]
    with pytest.raises(StaleSlotError, match="generation"):
        check_frame(arena.view(old["frame_offset"], old["frame_len"]), stale_desc)
    check_frame(frame_of(arena, new), descriptor(arena, "new", new))


def test_new_lease_invalidates_the_old_trailer():
    """A reader that copied the old header before the slot was leased again must still fail.

    The new lease zeroes the old frame's trailer before any payload is written."""
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    old = arena.lease("old", 1000)
    arena.commit("old")
    torn = frame_of(arena, old).copy()  # header and payload as a reader saw them first...
    arena.free("old")
    arena.lease("new", 200)  # ...then the slot is reused (different length)...
    torn[-8:] = frame_of(arena, old)[-8:]  # ...and the reader copies the trailer last
    with pytest.raises(StaleSlotError):
        check_frame(torn, descriptor(arena, "old", old))


def test_ttl_reap():
    arena = _native.SlotArena(2, 64 * 1024, 5.0)
    arena.lease("a", 10)
    arena.commit("a")
    assert arena.reap() == 0
    assert arena.reap_after(4.0) == 0
    assert arena.reap_after(5.5) == 1
    c = arena.counters()
    assert (c["reaped"], c["in_use"]) == (1, 0)
    assert not arena.free("a")  # the late notification is harmless and counted
    assert arena.counters()["unknown_free"] == 1


def test_copy_in_is_exact_and_threaded():
    _native.set_num_threads(2)
    arena = _native.SlotArena(1, 8 * MiB, 30.0)
    src = np.random.default_rng(1).integers(0, 2**31, (1000, 1000), dtype=np.int32)
    lease = arena.copy_in("k", src.reshape(-1).view(np.uint8))
    assert np.array_equal(arena.view(lease["payload_offset"], src.nbytes).view(np.int32),
                          src.reshape(-1))
    check_frame(frame_of(arena, lease), descriptor(arena, "k", lease))
    assert arena.copy_in("k2", src.reshape(-1).view(np.uint8)) is None  # full
    with pytest.raises(ValueError, match="contiguous"):
        arena.copy_in("k3", src[:, ::2])


def test_concurrent_leases_are_unique():
    arena = _native.SlotArena(8, 64 * 1024, 30.0)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    errors = []

    def worker(t):
        try:
            for i in range(500):
                key = f"{t}.{i}"
                lease = arena.lease(key, 64)
                if lease is None:
                    continue
                arena.view(lease["payload_offset"], 64)[:] = t
                arena.commit(key)
                with lock:
                    seen.append((lease["slot"], lease["generation"]))
                assert arena.free(key)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    gens = [g for _, g in seen]
    assert len(set(gens)) == len(gens)
    c = arena.counters()
    assert c["in_use"] == 0 and c["leased"] == c["freed"] == len(seen)


@pytest.mark.parametrize("args", [(0, 1 << 20, 1.0), (1, 64, 1.0), (1, 1000, 1.0),
                                  (1, 1 << 20, 0.0)])
def test_bad_arena_settings(args):
    with pytest.raises(ValueError):
        _native.SlotArena(*args)


def test_view_bounds():
    arena = _native.SlotArena(1, 64 * 1024, 1.0)
    with pytest.raises(ValueError):
        arena.view(64 * 1024 - 10, 11)
    with pytest.raises(ValueError):
        arena.view(-1, 1)


def test_descriptor_round_trip_and_rejects():
    d = Descriptor(agent="x", host="127.0.0.1", port=18515, addr=4096,
                   frame_len=_native.frame_bytes(100), nbytes=100, generation=3, key="k.1")
    assert Descriptor.decode(d.encode()) == d
    bad = [b"\x80\x04pickle", b"[]", b'{"v": 2}', d.encode().replace(b'"port":18515', b'"port":0'),
           d.encode().replace(b'"nbytes":100', b'"nbytes":"100"'),
           d.encode().replace(b'"frame_len":176', b'"frame_len":175'), b"{" * 5000]
    for raw in bad:
        with pytest.raises(DescriptorError):
            Descriptor.decode(raw)


def test_uncommitted_leases_are_never_reaped():
    """A producer still writing owns its slot.

    Reaping it would hand the slot to a second writer and mix their bytes in one frame."""
    arena = _native.SlotArena(1, 64 * 1024, 1.0)
    slow = arena.lease("slow", 100)
    assert arena.reap_after(3600) == 0
    assert arena.lease("other", 100) is None  # still the slow writer's
    arena.view(slow["payload_offset"], 100)[:] = 1
    assert arena.commit("slow")
    assert arena.reap_after(2) == 1


def test_reused_slot_with_a_longer_payload_is_detected():
    """The new payload covers the old trailer's place.

    Even bytes equal to the old generation there cannot pass, because generations are random 64-bit
    values, not small counters."""
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    old = arena.lease("old", 1000)
    arena.commit("old")
    assert old["generation"] > 2**32  # not a small counter (random start)
    torn = frame_of(arena, old).copy()  # the reader copied header and payload first...
    arena.free("old")
    new = arena.lease("new", 4000)
    payload = arena.view(new["payload_offset"], 4000)
    payload[:] = 7
    # ...then the trailer, which now lies inside the new payload
    torn[-8:] = frame_of(arena, old)[-8:]
    with pytest.raises(StaleSlotError):
        check_frame(torn, descriptor(arena, "old", old))
    assert new["generation"] != old["generation"]


def test_free_during_write_never_mixes_frames():
    """The early-free interleaving.

    A's lease is freed while A is still writing. If the free went through, B would get A's slot, A's
    late bytes would land in B's payload, and B's frame would pass every check (magic, both
    generations, key hash) with mixed data. The free is refused: the slot stays A's until A commits
    or aborts, B gets another slot or none."""
    for slots in (1, 2):
        arena = _native.SlotArena(slots, 64 * 1024, 30.0)
        n = 4000
        a_data = np.full(n, 0xAA, np.uint8)
        b_data = np.full(n, 0xBB, np.uint8)
        a = arena.lease("A", n)
        a_view = arena.view(a["payload_offset"], n)
        a_view[:n // 2] = a_data[:n // 2]  # A is halfway through its write...
        assert not arena.free("A")  # ...a free (forged or early) arrives: refused
        assert arena.counters()["refused_free"] == 1
        b = arena.lease("B", n)
        if slots == 1:
            assert b is None  # the only slot is still A's
        else:
            assert b["slot"] != a["slot"]
            arena.view(b["payload_offset"], n)[:] = b_data
        a_view[n // 2:] = a_data[n // 2:]  # A finishes
        assert arena.commit("A")
        if b is not None:
            assert arena.commit("B")
            b_frame = frame_of(arena, b)
            check_frame(b_frame, descriptor(arena, "B", b))
            assert np.array_equal(b_frame[64:64 + n], b_data)
        a_frame = frame_of(arena, a)
        check_frame(a_frame, descriptor(arena, "A", a))
        assert np.array_equal(a_frame[64:64 + n], a_data)
        assert arena.free("A")  # committed: the reader's free now goes through


def test_generations_are_random_per_lease():
    """Not +1 per lease: a client that saw one generation cannot name the next lease's."""
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    gens = []
    for i in range(64):
        lease = arena.lease(f"k{i}", 8)
        arena.commit(f"k{i}")
        assert arena.free(f"k{i}")
        gens.append(lease["generation"])
    steps = {(b - a) % 2**64 for a, b in zip(gens, gens[1:], strict=False)}
    assert len(set(gens)) == 64 and 0 not in gens
    assert len(steps) > 60  # a counter (any stride) would give one step


def test_stale_error_does_not_leak_the_generation():
    arena = _native.SlotArena(1, 64 * 1024, 30.0)
    old = arena.lease("old", 100)
    arena.commit("old")
    stale = descriptor(arena, "old", old)
    arena.free("old")
    new = arena.lease("new", 100)
    arena.commit("new")
    with pytest.raises(StaleSlotError) as info:
        check_frame(frame_of(arena, old), stale)
    msg = str(info.value)
    assert str(new["generation"]) not in msg and f"{new['generation']:x}" not in msg
    assert str(old["generation"]) not in msg


_FAILING_GETRANDOM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>
/* getrandom that fails with EIO while SMG_TEST_GETRANDOM_FAIL is set. */
ssize_t getrandom(void *buf, size_t n, unsigned int flags) {
    static ssize_t (*real)(void *, size_t, unsigned int);
    if (getenv("SMG_TEST_GETRANDOM_FAIL")) { errno = EIO; return -1; }
    if (!real) real = (ssize_t (*)(void *, size_t, unsigned int))dlsym(RTLD_NEXT, "getrandom");
    return real(buf, n, flags);
}
"""

_LEASE_WITHOUT_RANDOMNESS = r"""
import os
import numpy as np
from smg_fast import _native
from smg_fast.transport.rdma.errors import ExportRefused
from smg_fast.transport.rdma.exporter import call_arena

arena = _native.SlotArena(1, 65536, 30.0)
os.environ["SMG_TEST_GETRANDOM_FAIL"] = "1"
reasons = []
for fn, arg in ((arena.lease, 10), (arena.copy_in, np.zeros(10, np.uint8))):
    try:
        call_arena(fn, "k" * 32, arg)
    except ExportRefused as exc:
        reasons.append(exc.reason)
del os.environ["SMG_TEST_GETRANDOM_FAIL"]
c = arena.counters()
ok = arena.lease("m" * 32, 10) is not None
print(reasons, c["in_use"], c["leased"], ok)
"""


def test_lease_that_cannot_draw_a_generation_loses_no_slot(tmp_path):
    """A lease that cannot draw a generation is refused and loses no slot.

    getrandom failing inside lease() is a typed refusal the lane counts as a fallback
    ("arena_error"), and the arena is unchanged: the slot is still there for the next lease."""
    import shutil
    import subprocess
    import sys

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler for the getrandom shim")
    src = tmp_path / "shim.c"
    src.write_text(_FAILING_GETRANDOM)
    lib = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True)
    env = dict(os.environ, LD_PRELOAD=str(lib))
    out = subprocess.run([sys.executable, "-c", _LEASE_WITHOUT_RANDOMNESS], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "['arena_error', 'arena_error'] 0 0 True"
