"""Orphans of dead producers are swept, never a live one's.

The sweep works across pid namespaces (each producer holds a lock); the segment pool backs off on a
small tmpfs."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("grpc")

from support.shm_common import (  # noqa: E402
    shm_call,
    wait_for,
)

from smg_fast.client import Client  # noqa: E402
from smg_fast.testing.servers import free_port, wait_serving  # noqa: E402
from smg_fast.transport import shm  # noqa: E402
from smg_fast.transport.tensors import (  # noqa: E402
    shm_namespace,
    sweep_dead_segments,
)

pytestmark = pytest.mark.usefixtures("no_shm_leak")


# ------------------------------------------------------------------------------------------
# 11. orphans across pid namespaces
# ------------------------------------------------------------------------------------------

_PRODUCER = """
import sys, time
from smg_fast.transport.shm import ShmRegistry
reg = ShmRegistry(sys.argv[1])
print(" ".join(reg.write(4096, lambda s: None) for _ in range(3)), flush=True)
time.sleep(120)
"""


def test_sweep_removes_orphans_of_a_producer_killed_in_another_pid_namespace(shm_subdir):
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) not installed")
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable,
                             "-c", _PRODUCER, shm_subdir], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read().strip()
            if err.startswith("unshare:"):
                pytest.skip(f"cannot make a pid namespace: {err}")
            pytest.fail(f"producer failed: {err}")
        names = line.split()
        assert names and all(n.startswith("smg-fast-1-") for n in names)  # pid 1 there
        lock = f"{names[0].rsplit('-', 1)[0]}.lock"
        assert sweep_dead_segments(shm_subdir) == []  # alive: its lock is held
        assert sorted(os.listdir(shm_subdir)) == sorted([*names, lock])
    finally:
        proc.kill()  # unshare --kill-child: the producer dies with it
        proc.wait(30)
    removed: list[str] = []
    wait_for(lambda: bool(removed.extend(sweep_dead_segments(shm_subdir)) or removed),
          what="the producer's lock to be released")
    assert sorted(removed) == sorted(names)
    assert os.listdir(shm_subdir) == []  # the lock file too


def test_sweep_trusts_the_lock_not_the_pid(shm_subdir):
    """An unlocked lock file whose pid is alive here (another namespace's pid) -> swept.

    A held lock whose pid is dead here -> kept."""
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    tag = shm._pidns_tag()
    orphan, live = f"{os.getppid()}-{tag}deadbeef", f"{dead}-{tag}cafef00d"
    files = {p: [f"smg-fast-{p}-{i}" for i in (1, 2)] + [f"smg-fast-{p}.lock"]
             for p in (orphan, live)}
    for group in files.values():
        for n in group:
            with open(os.path.join(shm_subdir, n), "wb") as fh:
                fh.write(b"x")
    fd = os.open(os.path.join(shm_subdir, f"smg-fast-{live}.lock"), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "live" is alive while we hold this
        removed = sweep_dead_segments(shm_subdir)
        assert sorted(removed) == sorted(files[orphan][:2])
        assert sorted(os.listdir(shm_subdir)) == sorted(files[live])
    finally:
        os.close(fd)
    assert sorted(sweep_dead_segments(shm_subdir)) == sorted(files[live][:2])
    assert os.listdir(shm_subdir) == []


_SERVER = """
import asyncio, sys
from smg_fast.server import ServerConfig
from smg_fast.server.app import serve
asyncio.run(serve(ServerConfig(port=int(sys.argv[1]), shm_dir=sys.argv[2], workers=1,
                               rdma_listen_port=0, shm_pool_mb=0, shm_min_bytes=1,
                               drain_timeout_s=1)))
"""


def test_a_killed_server_process_is_swept_and_a_live_one_is_not(small_jpegs, shm_subdir):
    def start() -> tuple[subprocess.Popen, str]:
        port = free_port()
        p = subprocess.Popen([sys.executable, "-c", _SERVER, str(port), shm_subdir],
                             stderr=subprocess.PIPE, text=True)
        wait_serving(f"127.0.0.1:{port}", p)
        return p, f"127.0.0.1:{port}"

    victim, victim_target = start()
    survivor, survivor_target = start()
    try:
        held = {}
        for p, target in ((victim, victim_target), (survivor, survivor_target)):
            with Client(target, timeout=60) as c:
                resp = shm_call(c._stub, small_jpegs["rocket"], shm_namespace(shm_subdir))
                held[p.pid] = resp.items[0].pixel_values.shm.name
                assert held[p.pid].startswith(f"smg-fast-{p.pid}-")
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        assert sweep_dead_segments(shm_subdir) == [held[victim.pid]]
        assert not any(n.startswith(f"smg-fast-{victim.pid}-") for n in os.listdir(shm_subdir))
        assert os.path.exists(os.path.join(shm_subdir, held[survivor.pid]))
    finally:
        for p in (victim, survivor):
            if p.poll() is None:
                p.terminate()
                p.wait(30)
    assert survivor.returncode == 0  # it unlinked its unread segment on the way out
    assert os.listdir(shm_subdir) == []  # and its lock file


# ------------------------------------------------------------------------------------------
# The segment pool on a small tmpfs
# ------------------------------------------------------------------------------------------


def test_pool_backs_off_and_gives_up_a_size_it_cannot_make(tmpfs, caplog):
    from smg_fast.transport.shm_pool import SegmentPool

    d = tmpfs(4)
    pool = SegmentPool(64 << 20, d, quiet_s=0.0, backoff_s=0.01, max_failures=3)
    try:
        with caplog.at_level(logging.DEBUG, logger="smg_fast.shm"):
            for n, size in enumerate((6 << 20, 10 << 20), 1):  # neither fits in 4 MiB
                assert pool.take(size) is None
                wait_for(lambda n=n: pool.stats()["abandoned"] == n, what="the pool to give up")
            assert pool.stats()["failed"] == 6  # three tries each, then never again
            assert pool.take(6 << 20) is None
            time.sleep(0.2)
            assert pool.stats()["failed"] == 6
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "giving that size up" in warnings[0].getMessage()
        assert not any(shm.is_segment_name(n) for n in os.listdir(d))
    finally:
        pool.close()
