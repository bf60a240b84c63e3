"""Benchmark regression gate.

Smg-fast at 1920x1080 on one thread, as ratios to references measured in the same run, compared with
the committed bench/baseline.json.

    python bench/gate.py            # measure, compare, exit 1 on a regression (.ci/run runs this)
    python bench/gate.py --update   # measure 3 times, write the medians to bench/baseline.json;
                                    # commit that file on its own, in a reviewed commit

Metrics (lower is better), per family (qwen2_vl, qwen3_vl, kimi_k25, glm4v, paddleocr_vl,
ernie4_5_vl_moe, hunyuan_vl, gemma3, gemma4, gemma3n) and dtype (float32, bfloat16):
  <family> <dtype> / copy   smg-fast time / the copy floor (np.copyto of the float32 output into
                            a preallocated, touched buffer): catches a slower resample or writer
  <family> <dtype> / ref    smg-fast time / the exact reference (transformers' PIL processor for
                            Qwen, GLM and the Gemmas, the upstream NumPy reference for Kimi;
                            bench/references.py)
Each host is judged by its own record: baseline entries are keyed by the kernel set in use and
the CPU model (with its family / model numbers), since kernels tuned on one microarchitecture run
differently on the next; a CPU without a record of its own is judged by the kernel set's record
from another CPU (the entries keyed by the kernel set alone), and the gate says so.
Absolute times are never compared: on a shared 2-core machine they move by 2x with other load,
while a ratio of two things measured side by side moves far less.

A metric regresses when it is more than its margin above its baseline: MARGIN, or the spread the
baseline recorded for it where that is wider (a metric as noisy as Gemma's small-output copy
ratios cannot be held to less than its own noise). Such a family is measured once
more before failing, in a fresh process (which tunes its kernels afresh, as a restarted server
would), and fails only if its ratio is over the margin in both measurements (the lower of the two
is reported), so neither one disturbed run nor one process's kernel choice fails CI; each
measurement's self-tuned kernel choices are printed with the failure.

Why a runner of its own rather than pytest-benchmark: pytest-benchmark times each implementation
in its own block of rounds, so load that starts or stops between two blocks skews their ratio. Here
every round runs the copy floor, smg-fast float32, smg-fast bfloat16 (each INNER times, in a
rotating order) and the reference back to back, timing CPU time, and a ratio is that of the
fastest runs: other load only ever adds time, and interleaving gives every implementation the same
quiet moments. Measured on the shared 2-core machine (load average 2-4), spread (max/min - 1) of
a metric over 3-4 runs: medians of per-round wall-time ratios up to 49%, of CPU-time ratios up to
38%; fastest/fastest up to 30% (kimi_k25 / copy; 18% for every other metric). It also keeps
pytest-benchmark out of the CI requirements (.[test]).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from references import kimi_upstream_numpy, load_photos, make_hf_pil

BASELINE = Path(__file__).with_name("baseline.json")
FAMILIES = ("qwen2_vl", "qwen3_vl", "kimi_k25", "glm4v")
FAMILIES += ("paddleocr_vl", "ernie4_5_vl_moe", "hunyuan_vl")
FAMILIES += ("gemma3",)
FAMILIES += ("gemma4", "gemma3n")
SIZE = (1920, 1080)
DTYPES = ("float32", "bfloat16")
# 25 rounds (the reference, 80-180 ms a call, dominates): one measurement of the three families
# takes ~30 s on the shared 2-core machine, the whole gate 30-60 s.
ROUNDS = 25
# The fast implementations run this many times per round (the reference once).
INNER = 3
# Allowed worsening of a ratio over its baseline (0.30 = 30% higher). Over 6 measurements on the
# shared 2-core machine (3 for the baseline, 3 gate runs) the widest spread of one metric was 30%
# (kimi_k25 / copy) and the worst gate run was 12% above the baseline (the median of 3), so 30%
# plus one re-measurement does not fail on noise, and still catches a kernel that got 1.3x slower.
MARGIN = 0.30
UPDATE_RUNS = 3


def kernel_key() -> str:
    """The kernel set in use (after SMG_FAST_ISA).

    Baselines are per kernel set, since an AVX2 machine's ratios are legitimately worse than an
    AVX-512 one's."""
    import smg_fast

    on = sorted(name for name, enabled in smg_fast.cpu_features().items() if enabled)
    return "+".join(on) or "baseline"


def cpu_model() -> str:
    """The CPU's model name and, on x86, its family and model numbers (what tells hosts apart).

    A VM may name every AMD host "AMD EPYC": the numbers tell a first-generation Zen (family 23
    model 1), where 256-bit AVX2 runs at half width, from a Zen 5 (family 26)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if not sep:
                    if fields:
                        break  # the first processor's block is enough
                    continue
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']} model {fields['model']})"
    return name


def baseline_key() -> str:
    """The baseline entry this host is judged by: its kernel set on its CPU model."""
    return f"{kernel_key()} @ {cpu_model()}"


def find_entry(data: dict, kernels: str, cpu_key: str) -> tuple[dict | None, str]:
    """This host's own record, else the kernel set's record from another CPU; and its key."""
    entries = data.get("entries", {})
    if cpu_key in entries:
        return entries[cpu_key], cpu_key
    return entries.get(kernels), kernels


def _timed(fn: Callable[[], object]) -> float:
    """CPU seconds the process spent in fn(), not wall time.

    On a shared machine this process is descheduled for whole time slices, which stretches a 10 ms
    call far more often than a 2 ms one and so skews wall-time ratios (measured: kimi float32 / copy
    2.3 -> 3.6 under a load average of 3). Everything timed runs on one thread, so CPU time is its
    running time."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def measure_family(family: str, image, rounds: int = ROUNDS,
                   raw: dict[str, list[float]] | None = None) -> dict[str, float]:
    """One family's speed ratios at SIZE on one native thread.

    Ratios of the fastest of each implementation's interleaved runs; `raw` (optional) receives every
    run's seconds, for looking into noise."""
    import smg_fast

    proc = smg_fast.load_processor(family)
    if family == "kimi_k25":
        def reference() -> np.ndarray:
            return kimi_upstream_numpy(image)
    else:
        hf = make_hf_pil(family)

        def reference() -> np.ndarray:
            return np.asarray(hf(image, return_tensors="np")["pixel_values"])

    return measure_against(family, proc, reference, image, rounds, raw)


def measure_against(label: str, proc, reference: Callable[[], np.ndarray], image,
                    rounds: int = ROUNDS, raw: dict[str, list[float]] | None = None,
                    dtypes: tuple[str, ...] = DTYPES,
                    output: str = "pixel_values") -> dict[str, float]:
    """measure_family's timing of `proc` on `image`, against a reference the caller gives.

    The reference is exact: a call returning the float32 `output` (smg-fast's output of that
    name). `dtypes`: those smg-fast computes for the family. Metrics are named after `label`."""
    import smg_fast

    before = smg_fast.get_num_threads()
    smg_fast.set_num_threads(1)
    try:
        expected = np.asarray(proc(image, dtype="float32")[output])
        # The reference is what we think it is: same tensor, bit for bit (also its warm-up call).
        if not np.array_equal(reference(), expected):
            raise AssertionError(f"{label}: the reference's output differs from smg-fast's")
        src = expected.reshape(-1).view(np.uint8)
        dst = np.empty_like(src)
        dst[...] = src  # first touch outside the timed region
        fast: dict[str, Callable[[], object]] = {
            "copy": lambda: np.copyto(dst, src),
            **{dt: (lambda dt=dt: proc(image, dtype=dt)) for dt in dtypes},
        }
        for fn in fast.values():
            fn()  # warm-up: pools filled, pages touched
        samples: dict[str, list[float]] = {name: [] for name in [*fast, "ref"]}
        names = list(fast)
        gc.collect()
        gc.disable()  # a collection inside one timed call would be charged to it alone
        try:
            for r in range(rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    samples[name] += [_timed(fast[name]) for _ in range(INNER)]
                samples["ref"].append(_timed(reference))
        finally:
            gc.enable()
    finally:
        smg_fast.set_num_threads(before)
    if raw is not None:
        for name, values in samples.items():
            raw.setdefault(f"{label} {name}", []).extend(values)
    best = {name: min(values) for name, values in samples.items()}
    return {f"{label} {dt} / {ref}": best[dt] / best[ref] for dt in dtypes
            for ref in ("copy", "ref")}


def tuning_choices() -> list[str]:
    """This process's self-tuned kernel choices so far, one line each."""
    import smg_fast

    return [f"{c['stage']} {c['key']}: {c['kernel']} ("
            + ", ".join(f"{k} {v:.1f} us" for k, v in c["median_us"].items()) + ")"
            for c in smg_fast.kernel_info()["tuning"]["choices"]]


def measure_in_fresh_process(family: str, rounds: int, raw: dict[str, list[float]]
                             ) -> tuple[dict[str, float], list[str]]:
    """measure_family in a new Python process: its ratios and that process's tuning choices."""
    out = subprocess.run([sys.executable, __file__, "--family", family, "--rounds", str(rounds)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"bench gate: re-measuring {family} in a fresh process failed "
                         f"(exit {out.returncode}; its stderr above)")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for name, values in result["seconds"].items():
        raw.setdefault(name, []).extend(values)
    return result["ratios"], result["tuning"]


def measure(families: tuple[str, ...], photo, rounds: int,
            raw: dict[str, list[float]] | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in families:
        out.update(measure_family(family, photo, rounds, raw))
    return out


def family_of(metric: str) -> str:
    return metric.split(" ", 1)[0]


def verdict(base: float | None, now: float, margin: float) -> str:
    if base is None:
        return "new (no baseline)"
    if now > base * (1 + margin):
        return "REGRESSION"
    if now < base / (1 + margin):
        return "faster (consider --update)"
    return "ok"


def print_table(baseline: dict[str, float], now: dict[str, float], margins: dict[str, float],
                remeasured: set[str]) -> list[str]:
    """pytest-benchmark --benchmark-compare style table; returns the regressed metrics."""
    rows, failed = [], []
    for metric in now:
        base = baseline.get(metric)
        v = verdict(base, now[metric], margins[metric])
        if v == "REGRESSION":
            failed.append(metric)
        if family_of(metric) in remeasured:
            v += " (re-measured)"
        change = f"{now[metric] / base - 1:+.1%}" if base else "n/a"
        rows.append((metric, f"{base:.4f}" if base else "n/a", f"{now[metric]:.4f}", change, v))
    head = ("metric", "baseline", "now", "change", "verdict")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for line in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    return failed


def load_baseline(path: Path) -> dict:
    if not path.is_file():
        return {"entries": {}}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def update(path: Path, photo, runs: int, rounds: int) -> int:
    measured = [measure(FAMILIES, photo, rounds) for _ in range(runs)]
    ratios = {m: round(statistics.median(r[m] for r in measured), 4) for m in measured[0]}
    spread = {m: round(max(r[m] for r in measured) / min(r[m] for r in measured) - 1, 3)
              for m in measured[0]}
    data = load_baseline(path)
    data["comment"] = ("Ratios (lower is better) written by `python bench/gate.py --update`: the "
                       "median of its runs; spread = max/min - 1 over those runs. Commit changes "
                       "to this file on their own, in a reviewed commit.")
    data.setdefault("entries", {})[baseline_key()] = {
        "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "runs": runs,
        "rounds": rounds,
        "ratios": ratios,
        "spread": spread,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print(f"wrote {path} for {baseline_key()} (median of {runs} runs; spread = max/min - 1):")
    for metric, ratio in ratios.items():
        print(f"  {metric:<26} {ratio:.4f}  spread {spread[metric]:.1%}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true",
                        help="measure and write the baseline instead of comparing")
    parser.add_argument("--baseline", type=Path, default=BASELINE,
                        help=f"baseline file (default {BASELINE.name} beside this script)")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"allowed worsening of a ratio, as a fraction (default {MARGIN}; a "
                        "metric whose baseline spread is wider is allowed that)")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds per family (default {ROUNDS})")
    parser.add_argument("--runs", type=int, default=UPDATE_RUNS,
                        help=f"measurements --update takes the median of (default {UPDATE_RUNS})")
    parser.add_argument("--family", choices=FAMILIES,
                        help="measure only this family and print its ratios and kernel choices as "
                        "one JSON line, comparing nothing (the gate's re-measurement runs this)")
    parser.add_argument("--json", type=Path,
                        help="also write the ratios and every round's seconds to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.runs < 1 or args.margin <= 0:
        parser.error("--rounds and --runs must be >= 1 and --margin > 0")

    t0 = time.perf_counter()
    photo = load_photos([SIZE])[SIZE]
    if args.family:
        seconds: dict[str, list[float]] = {}
        ratios = measure_family(args.family, photo, args.rounds, seconds)
        print(json.dumps({"ratios": ratios, "tuning": tuning_choices(), "seconds": seconds}))
        return 0
    if args.update:
        return update(args.baseline, photo, args.runs, args.rounds)

    key = kernel_key()
    entry, entry_key = find_entry(load_baseline(args.baseline), key, baseline_key())
    baseline = entry["ratios"] if entry else {}
    spread = entry.get("spread", {}) if entry else {}
    raw: dict[str, list[float]] = {}
    now = measure(FAMILIES, photo, args.rounds, raw)
    margins = {m: max(args.margin, spread.get(m, 0.0)) for m in now}
    over = {family_of(m) for m, v in now.items()
            if verdict(baseline.get(m), v, margins[m]) == "REGRESSION"}
    tuning = {"this process": tuning_choices()}
    for family in sorted(over):
        # One more measurement before failing, in a fresh process; a real regression shows in both.
        again, tuning[f"{family}'s re-measurement"] = measure_in_fresh_process(family, args.rounds,
                                                                              raw)
        now.update({m: min(now[m], v) for m, v in again.items()})
    record = f"{entry_key}, {entry['recorded']}" if entry else "none for these kernels"
    print(f"bench gate: {SIZE[0]}x{SIZE[1]}, 1 thread, kernels {key}, {args.rounds} rounds, "
          f"margin {args.margin:.0%}, CPU {cpu_model()}, baseline {args.baseline.name} "
          f"({record})")
    if entry and entry_key == key:
        print(f"bench gate: no record for this CPU ({baseline_key()}); judged by the kernel set's "
              f"record from {entry['machine']}. Record this host's own with "
              "`python bench/gate.py --update` and commit it.")
    failed = print_table(baseline, now, margins, over)
    if args.json:
        args.json.write_text(json.dumps({"ratios": now, "seconds": raw}, indent=1,
                                        sort_keys=True) + "\n", encoding="utf-8")
    print(f"wall time {time.perf_counter() - t0:.1f} s, load average {os.getloadavg()[0]:.2f}")
    if not entry:
        print(f"bench gate: no baseline for kernels {key}; nothing compared. Record one with "
              "`python bench/gate.py --update` on such a machine and commit it.")
        return 0
    if failed:
        for where, lines in tuning.items():
            print(f"self-tuned kernel choices, {where}:")
            for line in lines:
                print(f"  {line}")
        print(f"bench gate: FAILED, {len(failed)} ratio(s) worse than the baseline by more than "
              f"their margins in two measurements: {', '.join(failed)}")
        return 1
    print("bench gate: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
