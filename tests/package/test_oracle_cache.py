"""The on-disk oracle cache: reads mark entries used, a passing whole-suite run drops the rest."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from support.oracle_cache import cached, prune
from support.suite_markers import whole_suite

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
    leftover = tmp_path / "kind" / "00" / "abc.tmp"  # an interrupted write
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
