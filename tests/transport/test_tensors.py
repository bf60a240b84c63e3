"""TensorData encode / decode and the /dev/shm transport, on the real /dev/shm."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from smg_fast._proto import tensor_pb2  # noqa: E402
from smg_fast.transport import shm, tensors  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    ShmRegistry,
    TensorError,
    read_tensor,
    sweep_dead_segments,
    to_tensor_data,
)

SHM = "/dev/shm"
pytestmark = pytest.mark.usefixtures("no_shm_leak")


@pytest.mark.parametrize("transport", ["inline", "shm"])
@pytest.mark.parametrize("family", ["qwen2_vl", "kimi_k25"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_round_trip_equals_processor(transport, family, dtype, ours, real_images):
    proc = ours(family)
    img = real_images.rgb("chelsea")
    ref = proc(img, dtype=dtype)["pixel_values"]
    td = to_tensor_data(ref, dtype=dtype, transport=transport)
    assert td.dtype == dtype and list(td.shape) == list(ref.shape)
    got = read_tensor(td)
    assert got.dtype == ref.dtype and np.array_equal(got, ref)


def test_prepared_batch_writes_straight_into_shm(ours, real_images):
    proc = ours("qwen2_vl")
    img = real_images.rgb("rocket")
    ref = proc(img, dtype="bfloat16")["pixel_values"]
    batch = proc.prepare(img, "bfloat16")
    reg = ShmRegistry()
    name = reg.write(batch.nbytes, lambda seg: batch.write_into(seg.array(batch.np_dtype)))
    st = os.lstat(os.path.join(SHM, name))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o400  # read-only
    assert st.st_size == batch.nbytes
    assert shm._NAME_RE.match(name) and name.startswith(f"smg-fast-{os.getpid()}-")
    td = tensors.shm_tensor_data(name, batch.shape, "bfloat16", batch.nbytes)
    got = read_tensor(td)
    assert np.array_equal(got, ref)
    assert not os.path.exists(os.path.join(SHM, name))  # the consumer unlinked it
    assert reg.prune() == 0  # and the producer noticed


def test_as_torch_bfloat16_and_writable(ours, real_images):
    torch = pytest.importorskip("torch")
    proc = ours("qwen2_vl")
    img = real_images.rgb("chelsea")
    ref = proc(img, dtype="bfloat16", return_tensors="pt")["pixel_values"]
    for transport in ("inline", "shm"):
        td = to_tensor_data(ref.view(torch.uint16).numpy(), dtype="bfloat16",
                            transport=transport)
        t = read_tensor(td, as_torch=True)
        assert t.dtype == torch.bfloat16 and torch.equal(t, ref)
        t[0, 0] = 1.0  # writable (copy-on-write mapping / private copy)


def test_unlink_false_keeps_segment():
    arr = np.arange(100, dtype=np.int64)
    td = to_tensor_data(arr, transport="shm")
    path = os.path.join(SHM, td.shm.name)
    assert np.array_equal(read_tensor(td, unlink=False), arr)
    assert os.path.exists(path)
    assert np.array_equal(read_tensor(td), arr)
    assert not os.path.exists(path)


def test_offset_inside_segment():
    data = np.arange(5000, dtype=np.float32)
    reg = ShmRegistry()
    name = reg.write(data.nbytes, lambda seg: seg.array(np.float32).__setitem__(slice(None),
                                                                                  data))
    off = 4100 * 4  # past a page boundary, not page aligned
    td = tensor_pb2.TensorData(shape=[900], dtype="float32",
                               shm=tensor_pb2.ShmHandle(name=name, offset=off, nbytes=3600))
    assert np.array_equal(read_tensor(td), data[4100:])


def _shm_td(name, shape=(4,), dtype="float32", nbytes=16):
    return tensor_pb2.TensorData(shape=list(shape), dtype=dtype,
                                 shm=tensor_pb2.ShmHandle(name=name, nbytes=nbytes))


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "..", "x..y", "", "bad\0name",
                                  "/dev/shm/x"])
def test_rejects_bad_names(name):
    with pytest.raises(TensorError):
        read_tensor(_shm_td(name))


def test_rejects_symlink_fifo_and_wrong_sizes(tmp_path):
    target = tmp_path / "secret"
    target.write_bytes(b"\0" * 16)
    link = f"smg-fast-{os.getpid()}-{'0' * 16}-1"  # (names of the segment pattern)
    fifo = f"smg-fast-{os.getpid()}-{'0' * 16}-2"
    small = f"smg-fast-{os.getpid()}-{'0' * 16}-3"
    os.symlink(target, os.path.join(SHM, link))
    os.mkfifo(os.path.join(SHM, fifo), 0o600)
    with open(os.path.join(SHM, small), "wb") as fh:
        fh.write(b"\0" * 8)
    try:
        with pytest.raises(TensorError, match="symlink"):
            read_tensor(_shm_td(link))
        with pytest.raises(TensorError, match="regular file"):
            read_tensor(_shm_td(fifo))
        with pytest.raises(TensorError, match="holds 8 bytes"):
            read_tensor(_shm_td(small))
        with pytest.raises(TensorError, match="needs 16"):  # handle nbytes vs shape x dtype
            read_tensor(_shm_td(small, nbytes=8))
        assert target.exists()  # nothing was followed or removed
        assert os.path.exists(os.path.join(SHM, small))  # invalid handles unlink nothing
    finally:
        for n in (link, fifo, small):
            os.unlink(os.path.join(SHM, n))


_HUGE = """
import os, resource, sys
from smg_fast._proto import tensor_pb2
from smg_fast.transport.errors import TensorError
from smg_fast.transport.tensors import read_tensor
d, name = sys.argv[1], sys.argv[2]
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # no room for the mapping, any host
td = tensor_pb2.TensorData(shape=[1 << 20, 1 << 20], dtype="uint8",
                           shm=tensor_pb2.ShmHandle(name=name, offset=0, nbytes=1 << 40))
try:
    read_tensor(td, shm_dir=d)
except TensorError as exc:
    print("TensorError", exc)
"""


def test_a_segment_too_large_to_map_is_a_tensor_error(tmp_path):
    """A 1 TiB sparse segment whose handle matches: the failed mapping is a TensorError."""
    name = f"smg-fast-{os.getpid()}-{'0' * 16}-9"
    with open(tmp_path / name, "wb") as fh:
        fh.truncate(1 << 40)
    out = subprocess.run([sys.executable, "-c", _HUGE, str(tmp_path), name], capture_output=True,
                         text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("TensorError") and "cannot map" in out.stdout
    assert (tmp_path / name).exists()  # nothing unlinked


def test_missing_segment_and_bad_payloads():
    with pytest.raises(FileNotFoundError):
        read_tensor(_shm_td(f"smg-fast-{os.getpid()}-0000000000000000-999999"))
    with pytest.raises(TensorError, match="inline tensor has 3 bytes"):
        read_tensor(tensor_pb2.TensorData(shape=[4], dtype="float32", inline=b"abc"))
    with pytest.raises(TensorError, match="unsupported tensor dtype"):
        read_tensor(tensor_pb2.TensorData(shape=[1], dtype="complex64", inline=b"\0" * 8))
    with pytest.raises(TensorError, match="no payload"):
        read_tensor(tensor_pb2.TensorData(shape=[1], dtype="float32"))
    # A malformed remote handle is rejected before any NIXL agent is made.
    with pytest.raises(TensorError, match="descriptor"):
        read_tensor(tensor_pb2.TensorData(
            shape=[1], dtype="float32",
            remote=tensor_pb2.RemoteTensorHandle(transport="nixl/smg-fast-v1", nbytes=4)))
    with pytest.raises(TensorError, match="transport"):
        read_tensor(tensor_pb2.TensorData(
            shape=[1], dtype="float32",
            remote=tensor_pb2.RemoteTensorHandle(transport="tcp", nbytes=4, descriptor=b"{}")))


def test_registry_release_prune_ttl_and_close():
    reg = ShmRegistry()
    a = reg.write(64, lambda s: None)
    b = reg.write(64, lambda s: None)
    c = reg.write(64, lambda s: None)
    reg.release(a)
    assert not os.path.exists(os.path.join(SHM, a))
    os.unlink(os.path.join(SHM, b))  # a consumer read b
    assert reg.prune() == 1 and reg.owned() == [c]
    reg.ttl_s = 1e-9  # everything is expired now
    assert reg.prune() == 0 and reg.expired == 1
    assert not os.path.exists(os.path.join(SHM, c))
    d = reg.write(64, lambda s: None)
    assert reg.close() == 1 and not os.path.exists(os.path.join(SHM, d))
    with pytest.raises(RuntimeError):
        reg.create(64)


def test_failed_fill_unlinks_segment():
    reg = ShmRegistry()

    def fail(seg):
        view = seg.array(np.uint8)
        view[:4] = 1
        raise ValueError("native core failed")

    with pytest.raises(ValueError):
        reg.write(4096, fail)
    assert reg.owned() == []


def test_sweeper_removes_only_dead_pids_of_this_namespace():
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    tag = shm._pidns_tag()
    names = {
        "dead": f"smg-fast-{dead}-{tag}deadbeef-1",
        "alive": f"smg-fast-{os.getppid()}-{tag}deadbeef-1",
        "other_ns": f"smg-fast-{dead}-{'0' * 8 if tag != '0' * 8 else '1' * 8}deadbeef-1",
        "not_ours": f"smg-fast-{dead}-notanonce-1",
    }
    for n in names.values():
        with open(os.path.join(SHM, n), "wb") as fh:
            fh.write(b"x")
    try:
        removed = sweep_dead_segments()
        assert names["dead"] in removed
        assert not os.path.exists(os.path.join(SHM, names["dead"]))
        for key in ("alive", "other_ns", "not_ours"):
            assert os.path.exists(os.path.join(SHM, names[key])), key
    finally:
        for n in names.values():
            try:
                os.unlink(os.path.join(SHM, n))
            except FileNotFoundError:
                pass


def test_namespace_token():
    tok = tensors.shm_namespace()
    boot, dev = tok.rsplit(":", 1)
    assert boot and int(dev) == os.stat(SHM).st_dev
    assert tok == tensors.shm_namespace()


def _wait(cond, timeout=10.0):
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_segment_pool_serves_exact_sized_prefaulted_segments(ours, real_images):
    from smg_fast.transport.shm_pool import SegmentPool, ready_segment_names

    pool = SegmentPool(64 << 20, quiet_s=0.0)
    try:
        proc = ours("qwen2_vl")
        img = real_images.rgb("coffee")
        ref = proc(img)["pixel_values"]
        batch = proc.prepare(img)
        assert pool.take(batch.nbytes) is None  # nothing ready yet: demand recorded
        _wait(lambda: pool.stats()["ready"] == pool.depth)
        # Ready segments are unnamed: nothing in /dev/shm until one is published.
        assert pool.ready_names() == [] and not ready_segment_names()
        seg = pool.take(batch.nbytes)
        assert seg is not None and not seg.published and seg.nbytes == batch.nbytes
        batch.write_into(seg.array(batch.np_dtype))
        seg.publish()
        assert os.path.getsize(seg.path) == batch.nbytes  # shrunk from its size class
        seg.close()
        td = tensors.shm_tensor_data(seg.name, batch.shape, "float32", batch.nbytes)
        assert np.array_equal(read_tensor(td), ref)
        assert pool.take(10 << 30) is None  # larger than the budget: never pooled
        s = pool.stats()
        assert s["hits"] == 1 and s["misses"] == 1 and s["made"] >= 2
    finally:
        ready = pool.stats()["ready"]
        assert pool.close() == ready


def test_registry_with_pool_and_close(ours, real_images):
    reg = ShmRegistry(pool_bytes=32 << 20)
    reg.pool.quiet_s = 0.0
    data = np.arange(300_000, dtype=np.float32)

    def fill(seg):
        seg.array(np.float32)[:] = data

    first = reg.write(data.nbytes, fill)  # made on the spot; the pool learns the size
    _wait(lambda: reg.pool.stats()["ready"] >= 1)
    second = reg.write(data.nbytes, fill)  # from the pool
    assert reg.pool.stats()["hits"] == 1
    for name in (first, second):
        td = tensors.shm_tensor_data(name, data.shape, "float32", data.nbytes)
        assert np.array_equal(read_tensor(td), data)
    assert reg.prune() == 0
    reg.close()
    assert reg.pool.stats()["ready"] == 0


def test_segments_are_read_only_and_consumer_writes_stay_private(ours, real_images):
    proc = ours("qwen2_vl")
    img = real_images.rgb("rocket")
    ref = proc(img)["pixel_values"]
    batch = proc.prepare(img)
    reg = ShmRegistry()
    name = reg.write(batch.nbytes, lambda seg: batch.write_into(seg.array(batch.np_dtype)))
    path = os.path.join(SHM, name)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o400  # other users cannot write into it
    if os.geteuid() != 0:  # (root bypasses file modes)
        with pytest.raises(PermissionError):
            os.open(path, os.O_RDWR)
    td = tensors.shm_tensor_data(name, batch.shape, "float32", batch.nbytes)
    got = read_tensor(td, unlink=False)
    got[0, 0] = 123.0  # the consumer's copy-on-write mapping: never reaches the file
    assert np.array_equal(read_tensor(td), ref)
    assert not os.path.exists(path) and reg.prune() == 0
