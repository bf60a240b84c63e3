"""Every kernel family, not only the fastest one this CPU has: rerun the parity suites with the
hand-written kernels capped to AVX-512 without VNNI, to AVX2 and to baseline x86-64
(SMG_FAST_ISA), each in a fresh
process because the choice is made once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import smg_fast

TESTS = Path(__file__).parent
SUITES = ["test_resample.py", "test_kimi_parity.py", "test_dtypes.py", "test_qwen_parity.py",
          "test_convert.py"]


@pytest.mark.parametrize("isa", ["avx512-novnni", "avx2", "baseline"])
def test_parity_suites_under_isa_cap(isa):
    env = dict(os.environ, SMG_FAST_ISA=isa)
    probe = subprocess.run(
        [sys.executable, "-c", "import smg_fast, json; print(json.dumps(smg_fast.cpu_features()))"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert '"avx512vnni": false' in probe.stdout
    if isa != "avx512-novnni":
        assert '"avx512vbmi": false' in probe.stdout
    if isa == "baseline":
        assert '"avx2": false' in probe.stdout
    args = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
            *[str(TESTS / s) for s in SUITES]]
    run = subprocess.run(args, env=env, capture_output=True, text=True, cwd=TESTS.parent)
    tail = "\n".join(run.stdout.splitlines()[-15:])
    detail = f"{tail}\n{run.stderr[-2000:]}"
    assert run.returncode == 0, f"suites failed with SMG_FAST_ISA={isa}:\n{detail}"
    assert " passed" in tail


def test_default_uses_what_the_cpu_has():
    """Without a cap, the kernels in use are exactly what the CPU reports (a fast path lost
    to a detection bug would otherwise go unnoticed: its results are identical)."""
    if os.environ.get("SMG_FAST_ISA"):
        pytest.skip("SMG_FAST_ISA caps the kernels in this run")
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    except (OSError, IndexError):
        pytest.skip("no /proc/cpuinfo flags here")
    avx512 = {"avx512f", "avx512bw", "avx512vl"} <= flags
    expected = {"avx2": "avx2" in flags, "avx512": avx512,
                "avx512vbmi": avx512 and "avx512vbmi" in flags,
                "avx512vnni": avx512 and "avx512vbmi" in flags and "avx512_vnni" in flags}
    feats = smg_fast.cpu_features()
    assert {k: feats[k] for k in expected} == expected, (feats, expected)
