"""Reused shm segments within the process's limits.

Live slabs (two descriptors each) stay under a cap derived from RLIMIT_NOFILE, a delivery past it or
short of descriptors gets a fresh file (never a failed request), small tensors take about their size
in the tmpfs and count that against the caps, and bytes past a tensor are zeros."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("grpc")

from support.shm_common import chelsea_png, own_channel, shm_call  # noqa: E402

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast.client import read_response  # noqa: E402
from smg_fast.transport import shm, shm_reuse  # noqa: E402
from smg_fast.transport.tensors import read_tensor, shm_namespace, shm_tensor_data  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def _fill(value: int):
    return lambda seg: seg.array(np.uint8).fill(value)


def _read(d: str, name: str, off: int, nbytes: int) -> np.ndarray:
    return read_tensor(shm_tensor_data(name, (nbytes,), "uint8", nbytes, off), shm_dir=d)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 256 << 20))
def test_size_classes_waste_under_a_quarter(nbytes):
    total = shm_reuse.HEADER + nbytes
    cap = shm_reuse.size_class(nbytes)
    assert cap >= total and cap % shm_reuse.PAGE == 0
    assert cap - total < max(shm_reuse.PAGE, min(total // 4, shm_reuse.GRANULE))


def test_small_tensors_take_their_size_and_count_it(shm_subdir):
    """100 x 70 KB under an 8 MiB cap.

    The files delivered take at most the cap in the tmpfs (a 2 MiB slab each took 200 MB before),
    and the cap counts what they take."""
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=64 << 20, reuse=True,
                          max_outstanding_bytes=8 << 20)
    names = []
    try:
        for i in range(100):
            try:
                names.append(reg.deliver(70_000, _fill(i), caller="c")[0])
            except shm.ShmQuotaError:
                break
        taken = sum(os.stat(os.path.join(shm_subdir, n)).st_blocks * 512 for n in names)
        assert len(names) >= 90  # about 80 KiB each: ~100 fit
        assert taken <= 8 << 20
        assert reg.stats()["outstanding_bytes"] >= taken
    finally:
        reg.close()


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EBUSY])
def test_a_slab_that_cannot_be_made_means_a_fresh_file(shm_subdir, monkeypatch, code):
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=16 << 20, reuse=True,
                          max_outstanding_bytes=64 << 20)

    def fail(cap):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(reg.slabs, "_make", fail)
    try:
        name, off = reg.deliver(1 << 20, _fill(3))
        assert off == 0  # a fresh file, counted at its size
        assert reg.slabs.stats()["declined"] == 1 and reg.slabs.stats()["open"] == 0
        assert reg.stats()["outstanding_bytes"] == 1 << 20
        assert np.array_equal(_read(shm_subdir, name, off, 1 << 20),
                              np.full(1 << 20, 3, np.uint8))
        assert reg.prune() == 0
    finally:
        reg.close()


_UNREAD = """
import os, resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from smg_fast.transport import background, shm
from smg_fast.transport.tensors import read_tensor, shm_tensor_data
d = sys.argv[1]
background.DELAY_S = float(sys.argv[2])  # a loaded host: the background thread lags behind
reg = shm.ShmRegistry(d, pool_bytes=64 << 20, reuse=True, max_outstanding_bytes=1 << 30)
base = len(os.listdir("/proc/self/fd"))
got = [reg.deliver(70_000, lambda s, i=i: s.array(np.uint8).fill(i % 251))
       for i in range(300)]  # nobody reads them: 2 fds a live slab
background.wait_idle()  # fresh files' mappings (a descriptor each) are unmapped 20 ms later
held = len(os.listdir("/proc/self/fd")) - base
spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(64)]  # the process still has fds
for fd in spare:
    os.close(fd)
for i in (0, 31, 32, 33, 299):
    name, off = got[i]
    td = shm_tensor_data(name, (70_000,), "uint8", 70_000, off)
    assert np.array_equal(read_tensor(td, shm_dir=d), np.full(70_000, i % 251, np.uint8)), i
st = reg.slabs.stats()
print(held, st["open"], st["max_open"], st["declined"], sum(off == 0 for _, off in got),
      reg.stats()["unmapped_inline"])
reg.close()
"""


@pytest.mark.parametrize("delay_s", [0.02, 3.0])
def test_unread_segments_never_exhaust_descriptors(shm_subdir, delay_s):
    """300 unread deliveries at RLIMIT_NOFILE 256, the background unmapping on time or stalled.

    32 slabs live (an eighth of the limit), the rest are fresh files whose mappings (a descriptor
    each) wait for the background thread at most 16 at a time; every tensor is exact."""
    out = subprocess.run([sys.executable, "-c", _UNREAD, shm_subdir, str(delay_s)],
                         capture_output=True,
                         text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    held, live, max_open, declined, fresh, inline = map(int, out.stdout.split())
    assert max_open == 32 and live <= max_open
    if delay_s > 1:  # 16 wait for the stalled thread, the rest are unmapped inline and counted
        assert 0 < inline <= fresh - 16  # (fewer if this host took seconds over the loop)
    assert held <= 2 * max_open + 2  # (+ the background thread's, if any)
    assert declined == fresh == 300 - max_open


_KEPT = """
import os, resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
from smg_fast.transport import shm
from smg_fast.transport.tensors import read_tensor, shm_tensor_data
d = sys.argv[1]
reg = shm.ShmRegistry(d, pool_bytes=64 << 20, reuse=True, max_outstanding_bytes=1 << 30)
base = len(os.listdir("/proc/self/fd"))
kept = []
for i in range(600):  # a consumer that keeps every tensor it reads (a batch, a cache)
    name, off = reg.deliver(70_000, lambda s, i=i: s.array(np.uint8).fill(i % 251))
    td = shm_tensor_data(name, (70_000,), "uint8", 70_000, off)
    kept.append(read_tensor(td, shm_dir=d))
assert all(np.array_equal(a, np.full(70_000, i % 251, np.uint8)) for i, a in enumerate(kept))
print(len(os.listdir("/proc/self/fd")) - base)
reg.close()
"""


def test_tensors_a_consumer_keeps_hold_no_descriptors(shm_subdir):
    """600 read tensors kept alive at RLIMIT_NOFILE 256: their mappings hold no descriptor."""
    out = subprocess.run([sys.executable, "-c", _KEPT, shm_subdir], capture_output=True,
                         text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    # the producer's: 32 live slabs (2 each), up to 16 fresh files' mappings waiting to be unmapped
    assert int(out.stdout) <= 2 * 32 + 16 + 2


def test_a_forked_child_starts_with_no_unmaps_waiting():
    """The parent's queued unmaps never run in a child: its count starts at zero there."""
    from smg_fast.transport import shm_segment

    with shm_segment._waiting_lock:
        shm_segment._waiting += 1000
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if shm_segment._waiting == 0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        with shm_segment._waiting_lock:
            shm_segment._waiting -= 1000


_FORKED = """
import os
from smg_fast.transport import background
background.DELAY_S = 3600.0
background.call_later(lambda: None)  # queued in the parent, never due during the test
background.DELAY_S = 0.0
pid = os.fork()
if pid == 0:
    idle = background.wait_idle(1.0)  # nothing of its own queued yet
    done = []
    background.call_later(done.append, 1)
    os._exit(0 if idle and background.wait_idle(5.0) and done == [1] else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), background.wait_idle(0.1))
"""


def test_a_forked_child_runs_its_own_background_releases():
    """The parent's queue (an hour away here) is not the child's: its own calls run and finish."""
    out = subprocess.run([sys.executable, "-c", _FORKED], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "False"]  # the parent's call still waits in the parent


def test_released_slabs_of_another_class_make_room_at_the_cap(shm_subdir):
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=64 << 20, reuse=True)
    reg.slabs.max_open = 2
    try:
        a = [reg.deliver(1 << 20, _fill(1)) for _ in range(2)]
        for name, _ in a:
            os.unlink(os.path.join(shm_subdir, name))  # released, not yet pruned
        name, off = reg.deliver(3 << 20, _fill(2))  # another class: evicts an idle one
        assert off == shm_reuse.HEADER and reg.slabs.stats()["declined"] == 0
        assert reg.slabs.stats()["open"] <= 2
        assert np.array_equal(_read(shm_subdir, name, off, 3 << 20),
                              np.full(3 << 20, 2, np.uint8))
    finally:
        reg.close()


def test_a_reused_slab_has_zeros_past_its_tensor(shm_subdir):
    """A smaller tensor in a slab that held a larger one.

    The file holds nothing of the earlier tensor past the new one (one size class: 1,310,720 bytes).
    """
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=16 << 20, reuse=True)
    big, small = 1_200_000, 1 << 20
    try:
        assert reg.slabs.size_class(big) == reg.slabs.size_class(small)
        name, _ = reg.deliver(big, _fill(7))
        ino = os.stat(os.path.join(shm_subdir, name)).st_ino
        os.unlink(os.path.join(shm_subdir, name))
        name, off = reg.deliver(small, _fill(8))
        path = os.path.join(shm_subdir, name)
        assert os.stat(path).st_ino == ino  # the same file
        with open(path, "rb") as fh:
            data = np.frombuffer(fh.read(), np.uint8)
        assert np.array_equal(data[off:off + small], np.full(small, 8, np.uint8))
        assert not data[off + small:].any()  # no 7s left
        os.unlink(path)
    finally:
        reg.close()


def test_no_descriptor_left_falls_back_inline(start_server, shm_subdir, real_images, ours,
                                              monkeypatch):
    """EMFILE even for a fresh file: the item goes inline (counted), the request succeeds."""
    data = chelsea_png(real_images)
    ref = ours("qwen2_vl")(data)["pixel_values"]
    srv = start_server(shm_dir=shm_subdir, shm_pool_mb=64)

    def no_fds(*args, **kwargs):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(srv.server.registry, "deliver", no_fds)
    with own_channel(srv.target) as ch:
        resp = shm_call(pb_grpc.PreprocessorStub(ch), data, shm_namespace(shm_subdir))
    assert resp.items[0].transport == "inline"
    assert np.array_equal(read_response(resp).pixel_values, ref)
    assert srv.server.metrics.registry.get_sample_value(
        "smg_fast_fallback_total", {"reason": "shm_fds", "used": "inline"}) == 1
    srv.stop(timeout=5.0)
