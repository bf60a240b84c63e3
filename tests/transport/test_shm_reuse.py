"""Reused shm segments.

A released segment serves later responses (same inode, counted), a result a consumer holds never
changes, consumers that unlink (smg style), hold or truncate break nobody else's results nor the
server, unreleased ones expire, budgets hold, nothing leaks."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("grpc")

from support.shm_common import chelsea_png, own_channel, shm_call  # noqa: E402

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast.transport import shm, shm_reuse  # noqa: E402
from smg_fast.transport.tensors import read_tensor, shm_namespace, shm_tensor_data  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def _ino(d: str, name: str) -> int:
    return os.stat(os.path.join(d, name)).st_ino


def _copy_and_unlink(d: str, td) -> np.ndarray:
    """What smg's servicer does with offset != 0: read the bytes at offset, unlink the name."""
    h = td.shm
    path = os.path.join(d, h.name)
    with open(path, "rb") as fh:
        fh.seek(h.offset)
        data = fh.read(h.nbytes)
    os.unlink(path)
    return np.frombuffer(data, dtype=np.float32).reshape(tuple(td.shape))


@pytest.fixture
def pooled_server(start_server, shm_subdir):
    """A server of this test alone, reusing segments of a 64 MiB pool in its own shm_subdir.

    The directory is checked empty once it stops.
    """
    srv = start_server(shm_dir=shm_subdir, shm_pool_mb=64, shm_ttl_s=600)
    yield srv
    srv.stop(timeout=5.0)
    left = [n for n in os.listdir(shm_subdir) if not n.endswith(".lock")]
    assert left == [], f"left behind after stop: {left}"  # segments and the private dir


def _images(real_images):
    """Two images of one size (one size class), different pixels."""
    from PIL import Image
    from support.images import encode

    im = real_images.rgb("chelsea")
    return [chelsea_png(real_images), encode(im.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                                             "JPEG", quality=90)]


def test_released_segment_serves_the_next_response(pooled_server, shm_subdir, real_images, ours):
    images = _images(real_images)
    refs = [ours("qwen2_vl")(data)["pixel_values"] for data in images]
    ns = shm_namespace(shm_subdir)
    slabs = pooled_server.server.registry.slabs
    with own_channel(pooled_server.target) as ch:
        stub = pb_grpc.PreprocessorStub(ch)
        first = shm_call(stub, images[0], ns).items[0].pixel_values
        assert first.shm.offset == shm_reuse.HEADER
        ino = _ino(shm_subdir, first.shm.name)
        assert np.array_equal(_copy_and_unlink(shm_subdir, first), refs[0])  # smg style
        second = shm_call(stub, images[1], ns).items[0].pixel_values
        assert second.shm.name != first.shm.name  # a fresh name
        assert _ino(shm_subdir, second.shm.name) == ino  # the same file, and pages
        assert slabs.stats()["reused"] == 1 and slabs.stats()["made"] == 1
        assert np.array_equal(read_tensor(second, shm_dir=shm_subdir), refs[1])
    gc.collect()
    registry = pooled_server.server.metrics.registry
    reused = registry.get_sample_value("smg_fast_shm_reuse_reused_total")
    assert reused == 1


def test_a_held_result_never_changes(pooled_server, shm_subdir, real_images, ours):
    """read_tensor maps the segment (no copy) and unlinks its name.

    While the caller holds the array the server cannot lease the file, so it writes elsewhere; once
    it is dropped, the file is reused."""
    images = _images(real_images)
    refs = [ours("qwen2_vl")(data)["pixel_values"] for data in images]
    ns = shm_namespace(shm_subdir)
    slabs = pooled_server.server.registry.slabs
    with own_channel(pooled_server.target) as ch:
        stub = pb_grpc.PreprocessorStub(ch)
        first = shm_call(stub, images[0], ns).items[0].pixel_values
        ino = _ino(shm_subdir, first.shm.name)
        held = read_tensor(first, shm_dir=shm_subdir)  # mapped, name unlinked
        second = shm_call(stub, images[1], ns).items[0].pixel_values
        assert _ino(shm_subdir, second.shm.name) != ino
        assert slabs.stats()["busy"] >= 1 and slabs.stats()["reused"] == 0
        assert np.array_equal(held, refs[0])  # unchanged
        assert np.array_equal(read_tensor(second, shm_dir=shm_subdir), refs[1])
        del held
        gc.collect()
        third = shm_call(stub, images[1], ns).items[0].pixel_values
        assert _ino(shm_subdir, third.shm.name) == ino  # released: reused now
        assert np.array_equal(read_tensor(third, shm_dir=shm_subdir), refs[1])


def test_a_consumer_that_keeps_or_truncates_a_segment_harms_nobody(pooled_server, shm_subdir,
                                                                   real_images, ours):
    """A consumer (the server's user) opens its segment writable and keeps it.

    That file is never written again. Truncating it afterwards cannot crash the server, and a file
    found truncated when it would be reused is dropped; everyone else's results stay exact."""
    images = _images(real_images)
    refs = [ours("qwen2_vl")(data)["pixel_values"] for data in images]
    ns = shm_namespace(shm_subdir)
    slabs = pooled_server.server.registry.slabs
    with own_channel(pooled_server.target) as ch:
        stub = pb_grpc.PreprocessorStub(ch)
        bad = shm_call(stub, images[0], ns).items[0].pixel_values
        path = os.path.join(shm_subdir, bad.shm.name)
        ino = _ino(shm_subdir, bad.shm.name)
        os.chmod(path, 0o600)
        fd = os.open(path, os.O_RDWR)
        os.unlink(path)  # "released", but still open here
        try:
            for k in (1, 0):
                td = shm_call(stub, images[k], ns).items[0].pixel_values
                assert _ino(shm_subdir, td.shm.name) != ino
                assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), refs[k])
            os.ftruncate(fd, 0)
            os.write(fd, b"poison")
        finally:
            os.close(fd)
        dropped = slabs.stats()["dropped"]
        for k in (1, 0, 1):  # the truncated, chmodded file is found changed and dropped
            td = shm_call(stub, images[k], ns).items[0].pixel_values
            assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), refs[k])
        assert slabs.stats()["dropped"] > dropped
    assert pooled_server.server.registry.prune() == 0  # every name read: nothing outstanding


def test_unreleased_segments_expire_and_are_reused(shm_subdir):
    reg = shm.ShmRegistry(shm_subdir, ttl_s=0.2, pool_bytes=16 << 20, reuse=True)
    try:
        name, off = reg.deliver(1 << 20, lambda s: s.array(np.uint8).fill(5))
        ino = _ino(shm_subdir, name)
        time.sleep(0.3)
        assert reg.prune() == 0 and reg.stats()["expired"] == 1
        assert not os.path.exists(os.path.join(shm_subdir, name))
        name2, off2 = reg.deliver(1 << 20, lambda s: s.array(np.uint8).fill(6))
        assert _ino(shm_subdir, name2) == ino and off2 == off == shm_reuse.HEADER
        td = shm_tensor_data(name2, (1 << 20,), "uint8", 1 << 20, off2)
        assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), np.full(1 << 20, 6, np.uint8))
    finally:
        reg.close()
    assert [n for n in os.listdir(shm_subdir) if not n.endswith(".lock")] == []


def test_budgets_hold(shm_subdir):
    """Idle slabs stay within the pool budget.

    Delivered slabs within the cap and share, counted at what they take in the tmpfs (1 MiB -> 1.25
    MiB, 2 MiB -> 2.5, 5 MiB -> 6)."""
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=8 << 20, reuse=True,
                          max_outstanding_bytes=12 << 20, share_bytes=6 << 20)
    try:
        assert [reg.footprint(n << 20) for n in (1, 2, 5)] == [5 << 18, 5 << 19, 6 << 20]
        held = [reg.deliver(size, lambda s: None, caller="a")[0] for size in (1 << 20, 2 << 20)]
        with pytest.raises(shm.ShmQuotaError):
            reg.deliver(2 << 20, lambda s: None, caller="a")  # 6.25 MiB: over a's share
        held.append(reg.deliver(5 << 20, lambda s: None, caller="b")[0])  # 6 MiB: fits
        with pytest.raises(shm.ShmQuotaError):
            reg.deliver(2 << 20, lambda s: None, caller="c")  # 12.25 MiB: over the cap
        assert reg.stats()["outstanding_bytes"] == (5 << 18) + (5 << 19) + (6 << 20)
        for name in held:
            os.unlink(os.path.join(shm_subdir, name))
        assert reg.prune() == 0
        st = reg.slabs.stats()
        assert st["idle_bytes"] <= 8 << 20 and st["dropped"] >= 1
        assert reg.stats()["outstanding_bytes"] == 0
    finally:
        reg.close()


_OPENER = """
import os, sys, time
print("opening", flush=True)
t = time.monotonic()
fd = os.open(sys.argv[1], os.O_RDWR)
waited = time.monotonic() - t
os.ftruncate(fd, 0)
print(f"{waited:.3f}")
"""

_WRITER = """
import platform, subprocess, sys, time
import numpy as np
from smg_fast.transport import shm
reg = shm.ShmRegistry(sys.argv[1], pool_bytes=16 << 20, reuse=True)
child = []
OPEN = {"x86_64": {2, 257}, "aarch64": {56}}[platform.machine()]  # open, openat

def in_open(pid):  # /proc/PID/syscall: "NR args..." when blocked in one, else "running"
    with open(f"/proc/{pid}/syscall") as fh:
        nr = fh.read().split()[0]
    return nr.isdigit() and int(nr) in OPEN

def fill(slab):
    child.append(subprocess.Popen([sys.executable, "-c", sys.argv[2],
                                   f"/proc/{__import__('os').getpid()}/fd/{slab.fd}"],
                                  stdout=subprocess.PIPE, text=True))
    assert child[0].stdout.readline().strip() == "opening"  # started: its next call is the open()
    deadline = time.monotonic() + 60
    while not in_open(child[0].pid):  # however slow the host: it is now blocked in open()
        assert time.monotonic() < deadline and child[0].poll() is None
        time.sleep(0.005)
    time.sleep(0.5)  # the opener stays blocked by the lease meanwhile (its signal is harmless)
    slab.array(np.uint8).fill(9)

name, _ = reg.deliver(4 << 20, fill)
waited = float(child[0].communicate(timeout=60)[0].split()[-1])
print(f"alive {waited:.3f}")
reg.close()
"""


def test_opening_a_segment_while_it_is_written_waits_and_cannot_crash_the_producer(
        shm_subdir):
    """Opening a segment while the server writes it waits, and cannot crash the producer.

    Another process of the server's user reaches the file being written through /proc/<pid>/fd and
    truncates it: its open waits until the write is done, and the lease break's signal is harmless,
    so the producer survives."""
    out = subprocess.run([sys.executable, "-c", _WRITER, shm_subdir, _OPENER],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("alive ")
    assert float(out.stdout.split()[1]) >= 0.3  # it waited for the write


_CRASHER = """
import os, sys
import numpy as np
from smg_fast.transport import shm
reg = shm.ShmRegistry(sys.argv[1], pool_bytes=16 << 20, reuse=True)
name, _ = reg.deliver(1 << 20, lambda s: s.array(np.uint8).fill(1))
os.unlink(os.path.join(sys.argv[1], name))
reg.prune()  # one idle slab in the private directory, one delivered below
reg.deliver(1 << 20, lambda s: None)
reg.deliver(1 << 20, lambda s: None)
print(reg.slabs.dir_name)
os._exit(0)  # no close, no atexit: a crash
"""


def test_sweeper_removes_a_dead_producers_private_directory(shm_subdir):
    out = subprocess.run([sys.executable, "-c", _CRASHER, shm_subdir], capture_output=True,
                         text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    private = out.stdout.strip()
    assert private in os.listdir(shm_subdir)
    removed = shm.sweep_dead_segments(shm_subdir)
    assert private in removed and len(removed) == 3  # the dir and two delivered segments
    assert os.listdir(shm_subdir) == []


def test_without_leases_every_response_gets_a_new_file(shm_subdir, monkeypatch):
    def refuse(fd):
        raise shm_reuse.LeaseUnavailable(22, "no leases here")

    monkeypatch.setattr(shm_reuse, "_take_lease", refuse)
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=16 << 20, reuse=True)
    try:
        assert reg.slabs is None and reg.pool is not None
        name, off = reg.deliver(1 << 20, lambda s: s.array(np.uint8).fill(3))
        assert off == 0
        td = shm_tensor_data(name, (1 << 20,), "uint8", 1 << 20, off)
        assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), np.full(1 << 20, 3, np.uint8))
    finally:
        reg.close()
