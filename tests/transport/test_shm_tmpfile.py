"""Segments have no name until delivered (O_TMPFILE).

So a same-uid attacker cannot truncate one the server is writing (a SIGBUS would kill it)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("grpc")

from support.images import encode  # noqa: E402
from support.shm_common import (  # noqa: E402
    own_channel,
    shm_call,
    wait_for,
)

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc  # noqa: E402
from smg_fast._proto import tensor_pb2  # noqa: E402
from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.servers import free_port, wait_serving  # noqa: E402
from smg_fast.transport import shm  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    read_tensor,
    shm_namespace,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")


# ------------------------------------------------------------------------------------------
# Segments are unreachable until delivered (a same-uid consumer cannot SIGBUS the server)
# ------------------------------------------------------------------------------------------


def _segment_files(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if shm.is_segment_name(n))


def test_segments_are_invisible_until_delivered(shm_subdir):
    """Neither the pool's ready segments nor one being filled have a name in the directory.

    Only delivery (publish) links them, so nobody can open, chmod or truncate them first."""
    reg = shm.ShmRegistry(shm_subdir, pool_bytes=64 << 20)
    reg.pool.quiet_s = 0.0
    size = 3 << 20
    seen_while_filling = []
    try:
        first = reg.write(size, lambda seg: seg.array().fill(1))  # the pool learns the size
        assert _segment_files(shm_subdir) == [first]
        wait_for(lambda: reg.pool.stats()["ready"] == reg.pool.depth, what="ready segments")
        assert _segment_files(shm_subdir) == [first]  # ready, but not reachable

        def fill(seg):
            seen_while_filling.append(_segment_files(shm_subdir))
            seg.array().fill(2)

        second = reg.write(size, fill)  # from the pool
        assert reg.pool.stats()["hits"] == 1
        reg.pool.close()  # (fresh segments only from here)
        third = reg.write(size + 1, fill)
        assert seen_while_filling == [[first], sorted([first, second])]
        assert sorted(_segment_files(shm_subdir)) == sorted([first, second, third])
        for name, value, n in ((first, 1, size), (second, 2, size), (third, 2, size + 1)):
            st = os.stat(os.path.join(shm_subdir, name))
            assert st.st_mode & 0o777 == 0o400 and st.st_size == n
            td = tensor_pb2.TensorData(shape=[n], dtype="uint8",
                                       shm=tensor_pb2.ShmHandle(name=name, offset=0, nbytes=n))
            out = read_tensor(td, shm_dir=shm_subdir)
            assert np.array_equal(out, np.full(n, value, np.uint8))
        assert reg.prune() == 0 and reg.stats()["outstanding_bytes"] == 0
    finally:
        reg.close()


_ATTACKED_SERVER = """
import asyncio, sys
from smg_fast.server import ServerConfig
from smg_fast.server.app import serve
asyncio.run(serve(ServerConfig(port=int(sys.argv[1]), shm_dir=sys.argv[2], workers=2,
                               rdma_listen_port=0, shm_pool_mb=int(sys.argv[3]),
                               drain_timeout_s=1)))
"""


@pytest.mark.parametrize("pool_mb", [0, 64])
def test_same_uid_attacker_truncating_segments_cannot_crash_the_server(
        pool_mb, real_images, ours, shm_subdir, track_pid):
    """A same-uid attacker truncating segments cannot crash the server.

    A consumer running as the server's user lists the directory in a loop and makes every smg-fast
    file it sees writable and empty. It only ever sees delivered segments (never one the server is
    still writing, nor a ready pool one, whose truncation would kill the server's next store with
    SIGBUS): the server survives, and every tensor the attacker did not truncate reads back exact.
    """
    import threading

    from smg_fast.transport.tensors import TensorError

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _ATTACKED_SERVER, str(port), shm_subdir,
                             str(pool_mb)], stderr=subprocess.PIPE, text=True)
    track_pid(proc.pid)
    target = f"127.0.0.1:{port}"
    images = [encode(real_images.rgb("chelsea"), "PNG"),
              encode(real_images.rgb("astronaut"), "JPEG", quality=90)]
    refs = [ours("qwen2_vl")(data)["pixel_values"] for data in images]
    ns = shm_namespace(shm_subdir)
    stop = threading.Event()
    attacked: set[str] = set()

    def attacker() -> None:
        for _ in range(2_000_000):  # bounded; stops when the requests are done
            if stop.is_set():
                return
            for name in _segment_files(shm_subdir):
                path = os.path.join(shm_subdir, name)
                try:
                    os.chmod(path, 0o600)
                    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
                except OSError:
                    continue  # read and unlinked meanwhile
                try:
                    os.ftruncate(fd, 0)
                    attacked.add(name)
                finally:
                    os.close(fd)

    try:
        wait_serving(target, proc)
        thread = threading.Thread(target=attacker, daemon=True)
        thread.start()
        responses = []
        try:
            with own_channel(target) as ch:
                stub = pb_grpc.PreprocessorStub(ch)
                for i in range(24):  # handles kept, read after the attack: no mapping of ours
                    resp = shm_call(stub, images[i % 2], ns)  # can be truncated under us
                    assert resp.items[0].transport == "shm"
                    responses.append((i % 2, resp.items[0].pixel_values))
        finally:
            stop.set()
            thread.join(30)
        assert proc.poll() is None  # still running: no SIGBUS
        assert attacked  # the attacker did reach delivered segments
        for k, td in responses:
            try:
                out = read_tensor(td, shm_dir=shm_subdir)
            except TensorError as exc:  # it truncated this one after delivery: typed, no bytes
                assert td.shm.name in attacked and "holds 0 bytes" in str(exc)
                os.unlink(os.path.join(shm_subdir, td.shm.name))
                continue
            assert np.array_equal(out, refs[k])
        with Client(target, timeout=60) as c:  # and it keeps serving, exactly
            for data, ref in zip(images, refs, strict=True):
                td = shm_call(c._stub, data, ns).items[0].pixel_values
                out = read_tensor(td, shm_dir=shm_subdir)
                assert np.array_equal(out, ref)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
    assert proc.returncode == 0, proc.stderr.read()
    assert _segment_files(shm_subdir) == []


def test_without_o_tmpfile_segments_are_named_from_creation(shm_subdir, monkeypatch):
    """A filesystem that refuses O_TMPFILE (EOPNOTSUPP) gets today's named 0400 files.

    Visible while filled (the documented residual risk), delivered and read exactly the same."""
    import errno

    real_open = os.open

    def no_tmpfile(path, flags, *args, **kwargs):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "no O_TMPFILE here")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_tmpfile)
    reg = shm.ShmRegistry(shm_subdir)
    seen = []

    def fill(seg):
        seen.append(_segment_files(shm_subdir))
        seg.array().fill(7)

    try:
        name = reg.write(1000, fill)
        assert seen == [[name]] and _segment_files(shm_subdir) == [name]
        assert os.stat(os.path.join(shm_subdir, name)).st_mode & 0o777 == 0o400
        td = tensor_pb2.TensorData(shape=[1000], dtype="uint8",
                                   shm=tensor_pb2.ShmHandle(name=name, offset=0, nbytes=1000))
        assert np.array_equal(read_tensor(td, shm_dir=shm_subdir), np.full(1000, 7, np.uint8))
        with pytest.raises(RuntimeError):  # a failed fill leaves no file behind
            reg.write(1000, lambda seg: (_ for _ in ()).throw(RuntimeError("fill failed")))
        assert _segment_files(shm_subdir) == [] and reg.prune() == 0
        assert reg.stats()["outstanding_bytes"] == 0
    finally:
        reg.close()
