"""Every kernel family, not only the fastest one this CPU has.

The parity suites rerun under each SMG_FAST_ISA cap (each in a fresh process, because the choice is
made once per process, and with SMG_FAST_TUNE=0, so that the tables' fixed order picks), and each
run proves with smg_fast.kernel_info() which kernels ran: per stage, the best kernel that the cap
and this CPU allow (read from /proc/cpuinfo, not from our own detection), and nothing above the
cap. On a host without AVX-512 the avx512 caps must fall back to
avx2; a host with AVX-512 VBMI and VNNI runs all of them. The caps are those of the host's
architecture (on aarch64 only baseline, whose kernels are NEON: part of AArch64 itself)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from support.cpu_flags import cpu_flags

import smg_fast

TESTS = Path(__file__).parents[1]
SUITES = ["numerics/test_resample.py", "parity/test_kimi_parity.py", "numerics/test_dtypes.py",
          "parity/test_qwen_parity.py", "numerics/test_patchify_layouts.py",
          "numerics/test_patchify_kernels.py", "numerics/test_convert.py",
          "numerics/test_resample_torch.py", "numerics/test_resample_edges.py",
          "parity/test_glm4v_parity.py"]
SUITES += ["parity/test_qwen_like_parity.py"]
SUITES += ["numerics/test_resample_bilinear.py", "parity/test_gemma3_parity.py"]
SUITES += ["parity/test_gemma3n_parity.py"]
SUITES += ["parity/test_internvl_parity.py"]
SUITES += ["parity/test_pixtral_parity.py"]
SUITES += ["numerics/test_patchify_channels_last.py", "parity/test_gemma4_parity.py"]
SUITES += ["numerics/test_float_bicubic.py", "numerics/test_resample_planes.py"]
SUITES += ["numerics/test_expand_kernels.py::test_expand_equals_numpy"]
# SMG_FAST_ISA caps per architecture, lowest first: the ladders of csrc/dispatch.hpp.
CAPS_BY_ARCH = {"x86": ["baseline", "avx2", "avx512-novnni", "avx512"], "arm64": ["baseline"]}
ARCH = {"x86_64": "x86", "amd64": "x86", "aarch64": "arm64", "arm64": "arm64"}.get(
    platform.machine().lower(), "any")
CAPS = CAPS_BY_ARCH.get(ARCH, ["baseline"])
# Per stage, lowest first (as kernel_info()["kernels"] lists them): each kernel's name, the
# architecture it is compiled for ("any": portable C++), the lowest cap of that architecture's
# ladder that admits it, and the host flags it needs.
KERNELS = {
    "resample.vertical": [("scalar", "any", "baseline", ()), ("neon", "arm64", "baseline", ()),
                          ("sse2", "x86", "baseline", ()), ("avx2-madd", "x86", "avx2", ("avx2",)),
                          ("avx2", "x86", "avx2", ("avx2",)),
                          ("avx512", "x86", "avx512-novnni", ("avx512",))],
    "resample.horizontal": [("scalar", "any", "baseline", ()), ("neon", "arm64", "baseline", ()),
                            ("sse2", "x86", "baseline", ()), ("avx2", "x86", "avx2", ("avx2",)),
                            ("avx512vbmi", "x86", "avx512-novnni", ("avx512", "avx512vbmi")),
                            ("avx512vnni", "x86", "avx512",
                             ("avx512", "avx512vbmi", "avx512vnni"))],
    "patchify": [("table", "any", "baseline", ()), ("neon", "arm64", "baseline", ()),
                 ("avx2", "x86", "avx2", ("avx2",)),
                 ("avx512vbmi", "x86", "avx512-novnni", ("avx512", "avx512vbmi"))],
    "expand": [("scalar", "any", "baseline", ()), ("neon", "arm64", "baseline", ()),
               ("avx512vbmi", "x86", "avx512-novnni", ("avx512", "avx512vbmi"))],
}


def host_flags() -> dict[str, bool]:
    """What this CPU supports, from the kernel's view of it rather than from smg_fast's."""
    if ARCH != "x86":
        return {"avx2": False, "avx512": False, "avx512vbmi": False, "avx512vnni": False}
    flags = cpu_flags()  # an x86 Linux host always has them: empty would fail, not skip
    avx512 = {"avx512f", "avx512bw", "avx512vl"} <= flags
    return {"avx2": "avx2" in flags, "avx512": avx512,
            "avx512vbmi": avx512 and "avx512vbmi" in flags,
            "avx512vnni": avx512 and "avx512vbmi" in flags and "avx512_vnni" in flags}


def allowed(cap: str, host: dict[str, bool], arch: str = ARCH) -> dict[str, list[str]]:
    """Per stage, the kernels that may run under cap on this host, lowest first.

    The last one is what the dispatch must select."""
    ladder = CAPS_BY_ARCH.get(arch, ["baseline"])
    rank = ladder.index(cap)
    return {stage: [name for name, k_arch, min_cap, needs in kernels
                    if k_arch in ("any", arch) and ladder.index(min_cap) <= rank
                    and all(host[f] for f in needs)]
            for stage, kernels in KERNELS.items()}


def test_expectations_follow_the_host_and_the_cap():
    """The expectation itself.

    An AVX2-only host falls back to avx2 under the avx512 caps, an AVX-512 VBMI+VNNI host runs a
    different top kernel under each cap, an aarch64 host the NEON kernels."""
    x86 = CAPS_BY_ARCH["x86"]
    avx2_only = {"avx2": True, "avx512": False, "avx512vbmi": False, "avx512vnni": False}
    full = {"avx2": True, "avx512": True, "avx512vbmi": True, "avx512vnni": True}
    tops = {cap: {s: k[-1] for s, k in allowed(cap, avx2_only, "x86").items()} for cap in x86}
    assert tops["avx512"] == tops["avx2"] == {
        "resample.vertical": "avx2", "resample.horizontal": "avx2", "patchify": "avx2",
        "expand": "scalar"}
    assert tops["baseline"] == {
        "resample.vertical": "sse2", "resample.horizontal": "sse2", "patchify": "table",
        "expand": "scalar"}
    assert [allowed(cap, full, "x86")["resample.horizontal"][-1] for cap in x86] == [
        "sse2", "avx2", "avx512vbmi", "avx512vnni"]
    none = dict.fromkeys(full, False)
    assert {s: k[-1] for s, k in allowed("baseline", none, "arm64").items()} == {
        "resample.vertical": "neon", "resample.horizontal": "neon", "patchify": "neon",
        "expand": "neon"}


def test_kernels_are_the_native_tables():
    """KERNELS lists exactly the kernels of this build's dispatch tables (csrc/dispatch.hpp).

    Each with its architecture and lowest cap: a kernel added there needs its row here."""
    native: dict[str, list[tuple[str, str, str]]] = {}
    for k in smg_fast.kernel_info()["kernels"]:
        native.setdefault(k["stage"], []).append((k["name"], k["arch"], k["min_cap"]))
    ours = {stage: [(name, k_arch, min_cap) for name, k_arch, min_cap, _ in kernels
                    if k_arch in ("any", ARCH)]
            for stage, kernels in KERNELS.items()}
    assert native == ours


def check_kernels(info: dict, cap: str, host: dict[str, bool]) -> None:
    expect = allowed(cap, host)
    assert info["isa_cap"] == cap
    assert info["host"] == host
    assert info["selected"] == {s: k[-1] for s, k in expect.items()}, info["selected"]
    for stage, names in expect.items():
        ran = info["ran"][stage]
        assert names[-1] in ran, f"{stage}: {names[-1]} never ran under {cap} (ran: {ran})"
        assert set(ran) <= set(names), f"{stage}: {ran} ran, above the cap {cap} ({names})"


def selected_under(cap: str) -> dict[str, str]:
    """What the native module selects per stage under cap, asked in a fresh process."""
    code = "import json, smg_fast; print(json.dumps(smg_fast.kernel_info()))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, SMG_FAST_ISA=cap))
    info = json.loads(run.stdout)
    assert info["isa_cap"] == cap
    return info["selected"]


@pytest.fixture(scope="module")
def selections() -> dict[str, dict[str, str]]:
    """Per cap, the kernels it selects on this host."""
    return {cap: selected_under(cap) for cap in CAPS}


def representative(cap: str, selections: dict[str, dict[str, str]], caps: list[str] = CAPS) -> str:
    """The lowest cap that selects the same kernels as cap: the one whose run proves them."""
    return next(c for c in caps if selections[c] == selections[cap])


def test_caps_that_select_the_same_kernels_share_one_run():
    """Two caps share a run only when they select identical kernels.

    On an AVX2-only host the three upper caps select the avx2 kernels (one run), on a full AVX-512
    host each cap is a run of its own."""
    x86 = CAPS_BY_ARCH["x86"]
    avx2_only = {"avx2": True, "avx512": False, "avx512vbmi": False, "avx512vnni": False}
    full = dict(avx2_only, avx512=True, avx512vbmi=True, avx512vnni=True)
    for host, runs in ((avx2_only, ["baseline", "avx2", "avx2", "avx2"]), (full, x86)):
        sel = {cap: {s: k[-1] for s, k in allowed(cap, host, "x86").items()} for cap in x86}
        assert [representative(cap, sel, x86) for cap in x86] == runs


_runs: dict[str, dict] = {}  # cap -> kernel_info() after its suites passed, this session


def run_suites(cap: str, tmp_path: Path) -> dict:
    """The suites under cap in a fresh process (once per session).

    Kernel_info() from that process afterwards: what those suites ran."""
    if cap in _runs:
        return _runs[cap]
    out = tmp_path / "kernel_info.json"
    code = ("import json, sys, pytest; rc = pytest.main(sys.argv[2:]); import smg_fast; "
            "open(sys.argv[1], 'w').write(json.dumps(smg_fast.kernel_info())); sys.exit(int(rc))")
    args = [sys.executable, "-c", code, str(out), "-q", "-x", "-p", "no:cacheprovider",
            *[str(TESTS / s) for s in SUITES]]
    # Tuning off: the fixed order runs each stage's best allowed kernel (with tuning on, the default
    # suites' run checks the tuned choices against the same references).
    env = dict(os.environ, SMG_FAST_ISA=cap, SMG_FAST_TUNE="0")
    run = subprocess.run(args, env=env, capture_output=True, text=True, cwd=TESTS.parent)
    tail = "\n".join(run.stdout.splitlines()[-15:])
    detail = f"{tail}\n{run.stderr[-2000:]}"
    assert run.returncode == 0, f"suites failed with SMG_FAST_ISA={cap}:\n{detail}"
    assert " passed" in tail
    _runs[cap] = json.loads(out.read_text())
    return _runs[cap]


@pytest.mark.parametrize("cap", CAPS)
def test_parity_suites_under_isa_cap(cap, tmp_path, selections):
    """The suites pass under cap, and ran the kernels cap selects.

    One run per distinct kernel selection (a cap that selects what a lower cap selects is proven by
    that cap's run)."""
    host = host_flags()
    assert selections[cap] == {s: k[-1] for s, k in allowed(cap, host).items()}, selections
    rep = representative(cap, selections)
    check_kernels(run_suites(rep, tmp_path), rep, host)


def test_unknown_cap_means_baseline():
    code = "import json, smg_fast; print(json.dumps(smg_fast.kernel_info()))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, SMG_FAST_ISA="avx-512"))
    info = json.loads(run.stdout)
    assert (info["isa_cap"], info["isa_cap_env"]) == ("baseline", "avx-512")
    assert info["selected"] == {s: k[-1] for s, k in allowed("baseline", host_flags()).items()}


def test_default_uses_what_the_cpu_has():
    """Without a cap, the kernels in use are exactly what the CPU reports.

    A fast path lost to a detection bug would otherwise go unnoticed: its results are identical."""
    if os.environ.get("SMG_FAST_ISA"):
        pytest.skip("SMG_FAST_ISA caps the kernels in this run")
    expected = host_flags()
    feats = smg_fast.cpu_features()
    assert {k: feats[k] for k in expected} == expected, (feats, expected)
    assert smg_fast.kernel_info()["host"] == expected
