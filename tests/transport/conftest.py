"""Fixtures of the transport tests: tmpfs mounts and shm directories; RDMA peers, a puller.

Private tmpfs mounts and /dev/shm directories for the shm tests; RDMA exporters in child
processes and a module's puller for the NIXL tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest


@pytest.fixture
def tmpfs(tmp_path):
    """Factory: tmpfs(size_mb) -> a private tmpfs mount (root only), unmounted at the end."""
    mounts = []

    def make(size_mb: int) -> str:
        d = tmp_path / f"tmpfs{len(mounts)}"
        d.mkdir()
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs",
                              str(d)], capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a private tmpfs: {res.stderr.strip()}")
        mounts.append(str(d))
        return str(d)

    yield make
    for d in mounts:  # lazy: this process keeps its liveness lock file there open
        subprocess.run(["umount", "-l", d], check=False)


@pytest.fixture
def shm_subdir():
    """A private directory on the real /dev/shm tmpfs (sweeps there touch nothing else)."""
    d = os.path.join("/dev/shm", f"smg-fast-test-{uuid.uuid4().hex[:12]}")
    os.mkdir(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def peers():
    """Factory: peers(**opts) -> an exporter in a child process, closed after the test.

    The exporter is smg_fast.testing.rdma_peer's PeerProcess.
    """
    from smg_fast.testing.rdma_peer import PeerProcess

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
    """A Puller of 4 slots of 32 MiB, shared by the tests of a module."""
    from smg_fast.transport.rdma import Puller

    with Puller(slots=4, slot_bytes=32 << 20, timeout_s=10) as p:
        yield p
