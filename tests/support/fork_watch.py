"""The fork tests' child scripts fork over and over and count the forked children that hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

# tests/: a child script imports this module as support.fork_watch with it on PYTHONPATH.
TESTS_DIR = str(Path(__file__).resolve().parents[1])


def env_with_support(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of env with tests/ first on PYTHONPATH (the rest kept after it, in order)."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]  # "" would add the cwd
    return {**env, "PYTHONPATH": os.pathsep.join([TESTS_DIR, *rest])}


def run_fork_script(script: str) -> tuple[int, int]:
    """Runs a child script that prints "forks stuck" (fork_and_watch's counts); returns them.

    The script runs in a fresh interpreter with tests/ on its path; it must have forked."""
    run = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script],
                         env=env_with_support(os.environ), capture_output=True, text=True,
                         check=True, timeout=300)
    forks, stuck = map(int, run.stdout.split())
    assert forks > 0
    return forks, stuck


def exited(pid: int, polls: int, poll_s: float) -> bool:
    """Whether child pid exits (and is reaped) within polls waitpid polls poll_s seconds apart.

    A child that exits with another status than 0 (its work raised) fails the caller."""
    for _ in range(polls):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, f"forked child {pid} failed ({status})"
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
            code = 0
            try:
                in_child()
            except BaseException:  # noqa: BLE001 - reported by the exit status
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        forks += 1
        if not exited(pid, polls, poll_s):  # a child waiting forever: count it, kill it, reap it
            stuck += 1
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return forks, stuck
