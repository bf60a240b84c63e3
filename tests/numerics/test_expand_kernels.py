"""smg_fast.expand's kernels (scalar, AVX-512 VBMI, NEON) against NumPy's own lookup.

Random codes and random tables (every bit pattern, NaNs included: compared as bytes), both element
sizes, runs of 1 to 588 codes (the patch layouts' 392 and 588, and around one 64-code step), odd
totals, codes and destinations at offsets that no vector is aligned to, and the bytes around the
destination left alone. In process with the kernel this host selects, and under every SMG_FAST_ISA
cap of the host's architecture in a fresh process (the choice is made once per process), each
proving with kernel_info() which expand kernel ran."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

import smg_fast
from smg_fast import CompactTensor, expand

RUNS = (1, 2, 63, 64, 65, 127, 129, 392, 588)
DTYPES = (("float32", np.float32, np.uint32), ("bfloat16", np.uint16, np.uint16),
          ("float16", np.float16, np.uint16))
CAPS = {"x86": ["baseline", "avx2", "avx512-novnni", "avx512"], "arm64": ["baseline"]}.get(
    {"x86_64": "x86", "amd64": "x86", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), "any"), ["baseline"])


def by_numpy(codes: np.ndarray, lut: np.ndarray, run: int) -> np.ndarray:
    """lut[(i // run) % 3][codes[i]], by np.take of the flat table."""
    flat = codes.ravel().astype(np.int64)
    channel = (np.arange(flat.size) // run) % 3
    return np.take(lut.reshape(-1), channel * 256 + flat)


def check_cases(seed: int) -> int:
    """Every case of the module once; returns how many were compared."""
    rng = np.random.default_rng(seed)
    cases = 0
    for dtype, np_dtype, bits in DTYPES:
        es = np.dtype(bits).itemsize
        for run in RUNS:
            for runs in (1, 3, 4):  # odd totals where run is odd
                n = 3 * run * runs
                lut = rng.integers(0, 1 << (8 * es), (3, 256), dtype=np.uint64).astype(bits)
                lut = lut.view(np_dtype)
                off = int(rng.integers(1, 64))
                buf = rng.integers(0, 256, n + 64, dtype=np.uint8)
                codes = buf[off:off + n]  # a view that starts off bytes into its buffer
                want = by_numpy(codes, lut, run)
                c = CompactTensor(codes, lut, dtype, run)
                got = expand(c).view(np.uint8)
                assert np.array_equal(got, want.view(np.uint8)), (dtype, run, n)
                # into a destination es * k bytes into a buffer, its neighbours untouched
                k = int(rng.integers(1, 16))
                raw = np.full((n + 32) * es, 0xA5, np.uint8)
                out = raw[k * es:(k + n) * es].view(np_dtype)
                expand(c, out=out)
                assert np.array_equal(out.view(np.uint8), want.view(np.uint8)), (dtype, run, n, k)
                assert (raw[:k * es] == 0xA5).all() and (raw[(k + n) * es:] == 0xA5).all()
                cases += 1
        # runs longer than a parallel chunk, chunks that split runs, and runs of 1 (channel-last
        # patches) whose chunks start off a channel-0 code: on two native threads, so that the
        # chunks (65,536 codes) are separate calls
        before = smg_fast.get_num_threads()
        smg_fast.set_num_threads(2)
        try:
            for run, runs in ((588, 40), (70_001, 2), (1, 70_001), (5, 14_001)):
                n = 3 * run * runs
                lut = rng.integers(0, 1 << (8 * es), (3, 256), dtype=np.uint64).astype(bits)
                codes = rng.integers(0, 256, n, dtype=np.uint8)
                got = expand(CompactTensor(codes, lut.view(np_dtype), dtype, run))
                assert np.array_equal(got.view(np.uint8), by_numpy(codes, lut, run).view(np.uint8))
                cases += 1
        finally:
            smg_fast.set_num_threads(before)
    return cases


def test_expand_equals_numpy():
    assert check_cases(27) > 0
    info = smg_fast.kernel_info()
    assert info["selected"]["expand"] in info["ran"]["expand"]


@pytest.mark.parametrize("cap", CAPS)
def test_expand_under_each_cap(cap):
    """The same cases in a fresh process under cap: the selected kernel ran (and the short loop).

    Runs under 16 codes (RUNS has 1 and 2) take the portable loop, reported as "scalar"."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_expand_kernels as t; "
            "import smg_fast; n = t.check_cases(31); info = smg_fast.kernel_info(); "
            "print(json.dumps([n, info['selected']['expand'], info['ran']['expand']]))")
    env = dict(os.environ, SMG_FAST_ISA=cap)
    run = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    n, selected, ran = json.loads(run.stdout.splitlines()[-1])
    assert n > 0 and selected in ran and set(ran) <= {selected, "scalar"}
    if cap == "baseline":
        assert selected == ("neon" if CAPS == ["baseline"] and platform.machine() in (
            "aarch64", "arm64") else "scalar")


def test_out_overlapping_codes_or_table_is_refused():
    """A destination sharing bytes with the codes or the table: ValueError, nothing written."""
    from smg_fast import _native

    run, n = 90, 270
    lut = np.random.default_rng(5).integers(0, 1 << 16, (3, 256), dtype=np.uint16)
    buf = np.zeros(2 * n, np.uint8)
    buf[n:] = np.random.default_rng(6).integers(0, 256, n, dtype=np.uint8)
    codes, out = buf[n:], buf.view(np.uint16)  # out's second half is codes
    before = buf.copy()
    with pytest.raises(ValueError, match="overlap"):
        expand(CompactTensor(codes, lut, "bfloat16", run), out=out)
    assert np.array_equal(buf, before)
    table = np.zeros(3 * 256 + n, np.uint16)
    with pytest.raises(ValueError, match="overlap"):
        _native.expand_lut(np.zeros(n, np.uint8), table[:768].reshape(3, 256), run,
                           table[100:100 + n])


def test_run_too_long_for_the_codes_is_refused():
    """A run whose 3 * run overflows int64 (or exceeds the codes) is refused, not wrapped."""
    from smg_fast import _native

    lut = np.zeros((3, 256), np.uint16)
    for run in (6148914691236517206, 2**62, 3):
        with pytest.raises(ValueError, match="multiple of 3"):
            _native.expand_lut(np.array([1, 2], np.uint8), lut, run, np.zeros(2, np.uint16))


def test_torch_out_requiring_grad_is_refused():
    """expand writes out outside autograd: a destination that requires grad is refused."""
    torch = pytest.importorskip("torch")
    codes = torch.zeros(3 * 8, dtype=torch.uint8)
    lut = torch.zeros(3, 256, dtype=torch.float32)
    out = torch.zeros(3 * 8, dtype=torch.float32, requires_grad=True)
    with pytest.raises(ValueError, match="grad"):
        expand(CompactTensor(codes, lut, "float32", 8), out=out)
    assert out._version == 0 and not out.detach().any()
