"""Benchmark regression gate: smg-fast at 1920x1080 on one thread, as ratios to references
measured in the same run, compared with the committed bench/baseline.json.

    python bench/gate.py            # measure, compare, exit 1 on a regression (.ci/run runs this)
    python bench/gate.py --update   # measure 3 times, write the medians to bench/baseline.json;
                                    # commit that file on its own, in a reviewed commit

Metrics (lower is better), per family (qwen2_vl, qwen3_vl, kimi_k25) and dtype (float32, bfloat16):
  <family> <dtype> / copy   smg-fast time / the copy floor (np.copyto of the float32 output into
                            a preallocated, touched buffer): catches a slower resample or writer
  <family> <dtype> / ref    smg-fast time / the exact reference (transformers' PIL processor for
                            Qwen, the upstream NumPy reference for Kimi; bench/references.py)
Absolute times are never compared: on a shared 2-core machine they move by 2x with other load,
while a ratio of two things measured side by side moves far less.

A metric regresses when it is more than MARGIN above its baseline. Such a family is measured once
more before failing, and fails only if its ratio is over the margin in both measurements (the
lower of the two is reported), so one disturbed run does not fail CI.

Why a runner of its own rather than pytest-benchmark: pytest-benchmark times each implementation
in its own block of rounds, so load that starts or stops between two blocks skews their ratio. Here
every round times the copy floor, smg-fast float32, smg-fast bfloat16 and the reference back to back
(in a rotating order) and a ratio is taken within the round; the metric is the median of the
per-round ratios. It also keeps pytest-benchmark out of the CI requirements (.[test]).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from references import kimi_upstream_numpy, load_photos, make_hf_pil_qwen

BASELINE = Path(__file__).with_name("baseline.json")
FAMILIES = ("qwen2_vl", "qwen3_vl", "kimi_k25")
SIZE = (1920, 1080)
DTYPES = ("float32", "bfloat16")
# 25 rounds of ~140 ms (the reference dominates) keep one measurement of all three families near
# 10 s; medians of 25 per-round ratios moved by up to ~XX% between runs on the shared machine.
ROUNDS = 25
# The fast implementations run this many times per round and the round keeps their minimum:
# preemption only ever adds time, and a 5 ms call is easily hit by one time slice.
INNER = 3
# Allowed worsening of a ratio over its baseline (0.30 = 30% higher). Chosen from the spread of
# repeated gate runs on the project's shared 2-core machine (see README, "Speed").
MARGIN = 0.30
UPDATE_RUNS = 3


def kernel_key() -> str:
    """The kernel set in use (after SMG_FAST_ISA): baselines are per kernel set, since an AVX2
    machine's ratios are legitimately worse than an AVX-512 one's."""
    import smg_fast

    on = sorted(name for name, enabled in smg_fast.cpu_features().items() if enabled)
    return "+".join(on) or "baseline"


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure_family(family: str, image, rounds: int = ROUNDS) -> dict[str, float]:
    """Median per-round ratios for one family at SIZE on one native thread."""
    import smg_fast

    proc = smg_fast.load_processor(family)
    if family == "kimi_k25":
        def reference() -> np.ndarray:
            return kimi_upstream_numpy(image)
    else:
        hf = make_hf_pil_qwen(family)

        def reference() -> np.ndarray:
            return np.asarray(hf(image, return_tensors="np")["pixel_values"])

    before = smg_fast.get_num_threads()
    smg_fast.set_num_threads(1)
    try:
        expected = np.asarray(proc(image, dtype="float32")["pixel_values"])
        # The reference is what we think it is: same tensor, bit for bit (also its warm-up call).
        if not np.array_equal(reference(), expected):
            raise AssertionError(f"{family}: the reference's output differs from smg-fast's")
        src = expected.reshape(-1).view(np.uint8)
        dst = np.empty_like(src)
        dst[...] = src  # first touch outside the timed region
        fast: dict[str, Callable[[], object]] = {
            "copy": lambda: np.copyto(dst, src),
            **{dt: (lambda dt=dt: proc(image, dtype=dt)) for dt in DTYPES},
        }
        for fn in fast.values():
            fn()  # warm-up: pools filled, pages touched
        per_round: dict[str, list[float]] = {f"{dt} / {ref}": [] for dt in DTYPES
                                             for ref in ("copy", "ref")}
        names = list(fast)
        gc.collect()
        gc.disable()  # a collection inside one timed call would be charged to it alone
        try:
            for r in range(rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                best = {name: min(_timed(fast[name]) for _ in range(INNER)) for name in order}
                ref_s = _timed(reference)
                for dt in DTYPES:
                    per_round[f"{dt} / copy"].append(best[dt] / best["copy"])
                    per_round[f"{dt} / ref"].append(best[dt] / ref_s)
        finally:
            gc.enable()
    finally:
        smg_fast.set_num_threads(before)
    return {f"{family} {name}": statistics.median(v) for name, v in per_round.items()}


def measure(families: tuple[str, ...], photo, rounds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in families:
        out.update(measure_family(family, photo, rounds))
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


def print_table(baseline: dict[str, float], now: dict[str, float], margin: float,
                remeasured: set[str]) -> list[str]:
    """pytest-benchmark --benchmark-compare style table; returns the regressed metrics."""
    rows, failed = [], []
    for metric in now:
        base = baseline.get(metric)
        v = verdict(base, now[metric], margin)
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
    data.setdefault("entries", {})[kernel_key()] = {
        "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}",
        "runs": runs,
        "rounds": rounds,
        "ratios": ratios,
        "spread": spread,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print(f"wrote {path} for kernels {kernel_key()}:")
    print_table(ratios, ratios, MARGIN, set())
    print("spread over the runs: " + ", ".join(f"{m} {s:.1%}" for m, s in spread.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true",
                        help="measure and write the baseline instead of comparing")
    parser.add_argument("--baseline", type=Path, default=BASELINE,
                        help=f"baseline file (default {BASELINE.name} beside this script)")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"allowed worsening of a ratio, as a fraction (default {MARGIN})")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds per family (default {ROUNDS})")
    parser.add_argument("--runs", type=int, default=UPDATE_RUNS,
                        help=f"measurements --update takes the median of (default {UPDATE_RUNS})")
    parser.add_argument("--json", type=Path, help="also write the measured ratios to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.runs < 1 or args.margin <= 0:
        parser.error("--rounds and --runs must be >= 1 and --margin > 0")

    t0 = time.perf_counter()
    photo = load_photos([SIZE])[SIZE]
    if args.update:
        return update(args.baseline, photo, args.runs, args.rounds)

    key = kernel_key()
    entry = load_baseline(args.baseline).get("entries", {}).get(key)
    baseline = entry["ratios"] if entry else {}
    now = measure(FAMILIES, photo, args.rounds)
    over = {family_of(m) for m, v in now.items()
            if verdict(baseline.get(m), v, args.margin) == "REGRESSION"}
    for family in sorted(over):
        # One more measurement before failing; a real regression shows in both.
        again = measure_family(family, photo, args.rounds)
        now.update({m: min(now[m], v) for m, v in again.items()})
    print(f"bench gate: {SIZE[0]}x{SIZE[1]}, 1 thread, kernels {key}, {args.rounds} rounds, "
          f"margin {args.margin:.0%}, baseline {args.baseline.name} "
          f"({entry['recorded'] if entry else 'none for these kernels'})")
    failed = print_table(baseline, now, args.margin, over)
    if args.json:
        args.json.write_text(json.dumps(now, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wall time {time.perf_counter() - t0:.1f} s, load average {os.getloadavg()[0]:.2f}")
    if not entry:
        print(f"bench gate: no baseline for kernels {key}; nothing compared. Record one with "
              "`python bench/gate.py --update` on such a machine and commit it.")
        return 0
    if failed:
        print(f"bench gate: FAILED, {len(failed)} ratio(s) worse than the baseline by more than "
              f"{args.margin:.0%} in two measurements: {', '.join(failed)}")
        return 1
    print("bench gate: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
