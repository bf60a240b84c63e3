"""The on-disk oracle cache: reads mark entries used, a passing whole-suite run drops the rest."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.oracle_cache import cached, prune
from support.suite_markers import whole_suite

import smg_fast

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_prune_keeps_what_was_read_or_written_since(tmp_path, monkeypatch):
    monkeypatch.setenv("SMG_FAST_ORACLE_CACHE", str(tmp_path))
    calls = []

    def compute(value):
        calls.append(value)
        return {"x": np.full(4, value, np.float32)}

    for value in (1, 2, 3):
        cached("kind", (value,), lambda value=value: compute(value))
    entries = sorted(tmp_path.glob("kind/*/*.npz"))
    assert len(entries) == 3
    past = time.time() - 3600
    for path in entries:
        os.utime(path, (past, past))
    (tmp_path / "kind" / "00").mkdir(exist_ok=True)
    leftover = tmp_path / "kind" / "00" / "tmpabc_123.tmp"  # an interrupted write (mkstemp)
    leftover.write_bytes(b"partial")
    os.utime(leftover, (past, past))

    start = time.time() - 1
    assert np.array_equal(cached("kind", (2,), lambda: compute(-1))["x"], np.full(4, 2))  # a hit
    cached("kind", (4,), lambda: compute(4))  # a new entry
    assert calls == [1, 2, 3, 4]

    deleted, size = prune(start)
    assert deleted == 3 and size > 0  # entries 1 and 3, and the leftover
    assert not leftover.exists()
    assert len(list(tmp_path.glob("kind/*/*.npz"))) == 2
    for value in (2, 4):  # still there
        cached("kind", (value,), lambda: compute(-1))
    cached("kind", (1,), lambda value=1: compute(value))  # computed again
    assert calls == [1, 2, 3, 4, 1]


def test_prune_without_a_cache_deletes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SMG_FAST_ORACLE_CACHE", "off")
    assert prune(time.time()) == (0, 0)
    monkeypatch.setenv("SMG_FAST_ORACLE_CACHE", str(tmp_path / "absent"))
    assert prune(time.time()) == (0, 0)


def _config(args, *options):
    """The config pytest parses from args and options (its own option names)."""
    return pytest.Config.fromdictargs({}, [*args, *options])


def test_only_the_whole_suite_prunes():
    assert whole_suite(_config([TESTS]))
    assert whole_suite(_config([TESTS + "/"]))
    assert whole_suite(_config([TESTS], "-q", "-p", "no:cacheprovider"))
    assert not whole_suite(_config([TESTS + "/video"]))
    assert not whole_suite(_config([TESTS, TESTS + "/video"]))
    assert not whole_suite(_config([TESTS + "/package/test_oracle_cache.py::test_x"]))
    for narrowed in (["-k", "video"], ["-m", "not slow"], ["--lf"], ["--deselect", "tests/x.py"],
                     ["-x"], ["--maxfail", "1"], ["--co"], ["--setup-only"], ["--setup-plan"],
                     ["--sw"], ["--sw-skip"], ["--ignore", "tests/parity"],
                     ["--ignore-glob", "*parity*"]):
        assert not whole_suite(_config([TESTS], *narrowed)), narrowed
    deselected = _config([TESTS])
    deselected._smg_deselected = 3  # a plugin's pytest_deselected
    assert not whole_suite(deselected)


def _old_file(path, data: bytes = b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    past = time.time() - 3600
    os.utime(path, (past, past), follow_symlinks=False)
    return path


def test_prune_deletes_only_what_the_cache_wrote(tmp_path, monkeypatch):
    """SMG_FAST_ORACLE_CACHE naming a folder of other files (a home, a data set) loses none."""
    key = "ab" + "0" * 62
    entry = _old_file(tmp_path / "cache" / "kind" / "ab" / f"{key}.npz")
    leftover = _old_file(tmp_path / "cache" / "kind" / "ab" / "tmpq1w2e3r4.tmp")
    theirs = [_old_file(tmp_path / "cache" / "project" / "data" / "weights.npz"),
              _old_file(tmp_path / "cache" / "project" / "build" / "obj.tmp"),
              _old_file(tmp_path / "cache" / "kind" / "cd" / f"{key}.npz"),  # not its shard
              _old_file(tmp_path / "cache" / "kind" / "ab" / "notes.npz")]
    outside = _old_file(tmp_path / "elsewhere" / "ab" / f"{key}.npz")
    (tmp_path / "cache" / "linked").symlink_to(tmp_path / "elsewhere")  # a folder link
    (tmp_path / "cache" / "kind" / "ef").symlink_to(tmp_path / "elsewhere" / "ab")
    monkeypatch.setenv("SMG_FAST_ORACLE_CACHE", str(tmp_path / "cache"))

    assert prune(time.time())[0] == 2
    assert not entry.exists() and not leftover.exists()
    for path in [*theirs, outside]:
        assert path.exists(), path


@pytest.mark.parametrize("option", ["--collect-only", "--setup-plan"])
def test_a_whole_suite_run_that_runs_nothing_prunes_nothing(option, tmp_path):
    """``pytest tests --collect-only`` passes having read no entry: it must delete none."""
    entry = _old_file(tmp_path / "kind" / "ab" / ("ab" + "0" * 62 + ".npz"))
    env = {**os.environ, "SMG_FAST_ORACLE_CACHE": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(Path(smg_fast.__file__).parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", TESTS, option, "-q", "-p",
                           "no:cacheprovider"], env=env, cwd=os.path.dirname(TESTS),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert entry.exists()
