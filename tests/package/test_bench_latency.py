"""The single-request latency bench runs end to end against real servers (no timings checked)."""

from __future__ import annotations

import pytest

pytest.importorskip("grpc")

from smg_fast.bench import latency  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def test_latency_bench_runs(capsys):
    assert latency.main(["--rounds", "1", "--requests", "1", "--gap-s", "0"]) == 0
    out = capsys.readouterr().out
    for mode in ("| off |", "| hit |", "| miss |", "| in-process hot |", "| in-process idle |"):
        assert mode in out
