"""Which smg-fast segments in /dev/shm this test session answers for.

So that the session and each test can fail on the ones they leave behind.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SHM_DIR = Path("/dev/shm")
# Processes whose segments this test session answers for: itself and the servers it spawned
# (tests add the pids of their subprocesses). Other processes' segments are never touched.
OUR_PIDS: set[int] = set()


def shm_files() -> set[str]:
    """smg-fast segment files in /dev/shm created by this session's processes.

    Also the liveness lock files of those that are gone (a live producer keeps its own).
    """
    from smg_fast.transport.shm_owner import pid_alive

    pids = {os.getpid(), *OUR_PIDS}
    pattern = re.compile(r"^smg-fast-(\d+)-")
    out = set()
    try:
        for p in SHM_DIR.iterdir():
            m = pattern.match(p.name)
            if m and int(m.group(1)) in pids:
                if p.name.endswith(".lock") and pid_alive(int(m.group(1))):
                    continue
                out.add(p.name)
    except OSError:
        pass
    return out


def pool_ready() -> set[str]:
    """What live servers in this process own: their pools' ready segments, reuse directories.

    Owned, not leaked: segments kept ready in a pool and the private directories of reused ones.
    """
    pool = sys.modules.get("smg_fast.transport.shm_pool")
    reuse = sys.modules.get("smg_fast.transport.shm_reuse")  # live servers' private dirs
    return ((pool.ready_segment_names() if pool is not None else set())
            | (reuse.live_reuse_dirs() if reuse is not None else set()))
