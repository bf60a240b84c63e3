"""The fork tests' child scripts fork over and over and count the forked children that hang."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

# tests/: a child script imports this module as support.fork_watch with it on PYTHONPATH.
TESTS_DIR = str(Path(__file__).resolve().parents[1])


def env_with_support(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of env with tests/ first on PYTHONPATH (the rest kept after it, in order)."""
    return {**env, "PYTHONPATH": os.pathsep.join([TESTS_DIR, env.get("PYTHONPATH", "")])}


def exited(pid: int, polls: int, poll_s: float) -> bool:
    """Whether child pid exits (and is reaped) within polls waitpid polls poll_s seconds apart."""
    for _ in range(polls):
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
        time.sleep(poll_s)
    return False


def fork_and_watch(in_child: Callable[[], object], go_on: Callable[[], bool], max_forks: int,
                   polls: int, poll_s: float) -> tuple[int, int]:
    """Fork while go_on() and under max_forks (children run in_child, then exit): (forks, stuck)."""
    forks = stuck = 0
    while go_on() and forks < max_forks:
        pid = os.fork()
        if pid == 0:  # never back into the parent's code, even when in_child raises
            try:
                in_child()
            finally:
                os._exit(0)
        forks += 1
        if not exited(pid, polls, poll_s):  # a child waiting forever: count it, kill it, reap it
            stuck += 1
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return forks, stuck
