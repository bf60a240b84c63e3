"""The normalize + patchify stage on one thread, per family and dtype.

For a random 1920x1080 RGB image: the whole processor call, the stage alone (Pipeline.run on an
image already at the resized size, so the resize is a band copy) and the copy floor (np.copyto of
the output's bytes into a touched buffer). Medians (and minimums) of per-call times, CPU time by
default.

    PYTHONPATH=src python bench/patchify_stage.py                 # this build, one process
    python bench/patchify_stage.py --compare A=path/to/src B=...  # builds side by side: each
        round runs every build in a fresh process, in turn, so load hits them alike
    PYTHONPATH=src python bench/patchify_stage.py --tune  # this build with self-tuning on and
        with SMG_FAST_TUNE=0, side by side as --compare runs builds

SMG_FAST_ISA caps the kernels as usual (it is passed on to --compare's processes)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

from side_by_side import run_rounds

CASES = [("qwen2_vl", {}), ("qwen3_vl", {}), ("kimi_k25", {}), ("glm4v", {}),
         ("qwen2_vl", {"backend": "torchvision"})]
CASES += [("paddleocr_vl", {}), ("ernie4_5_vl_moe", {}), ("hunyuan_vl", {})]
CASES += [("gemma3", {}), ("gemma3", {"backend": "torchvision"})]
DTYPES = ("float32", "bfloat16")


def case_name(family: str, kw: dict) -> str:
    return family + (f" {kw['backend']}" if kw else "")


def measure(runs: int, wall: bool) -> dict:
    import numpy as np

    import smg_fast

    smg_fast.set_num_threads(1)
    clock = time.perf_counter if wall else time.thread_time
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)

    def times(f) -> list[float]:
        f()
        out = []
        for _ in range(runs):
            t = clock()
            f()
            out.append((clock() - t) * 1e3)
        return out

    res = {}
    for family, kw in CASES:
        proc = smg_fast.load_processor(family, **kw)
        plan = proc.plan(1920, 1080)
        resized = rng.integers(0, 256, (plan.resize_h, plan.resize_w, 3), dtype=np.uint8)
        for dtype in DTYPES:
            pipe = proc.pipeline(dtype)
            out = np.asarray(proc([img], dtype=dtype)["pixel_values"]).reshape(-1)
            dst = np.empty_like(out)
            args = (plan.resize_w, plan.resize_h, plan.grid_h, plan.grid_w, dst)
            res[f"{case_name(family, kw)} {dtype}"] = {
                "kernel": pipe.kernel, "mb": out.nbytes / 1e6,
                "call": times(lambda: proc([img], dtype=dtype)),  # noqa: B023
                "stage": times(lambda: pipe.run(resized, *args)),  # noqa: B023
                "copy": times(lambda: np.copyto(dst, out)),  # noqa: B023
            }
    return res


def table(results: dict[str, dict]) -> str:
    lines = [f"{'case':24s} {'build':8s} {'kernel':12s} {'MB':>5s}   call ms (min)    "
             f"stage ms (min)   copy ms (min)   call/copy"]
    cases = next(iter(results.values())).keys()
    for case in cases:
        for build, res in results.items():
            r = res[case]
            med = {k: statistics.median(r[k]) for k in ("call", "stage", "copy")}
            cols = "  ".join(f"{med[k]:7.2f} ({min(r[k]):6.2f})" for k in ("call", "stage", "copy"))
            lines.append(f"{case:24s} {build:8s} {r['kernel']:12s} {r['mb']:5.1f}  {cols}   "
                         f"{med['call'] / med['copy']:5.2f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="timed calls per round (default 15)")
    ap.add_argument("--rounds", type=int, default=3, help="--compare: rounds (default 3)")
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of CPU time")
    ap.add_argument("--compare", nargs="+", metavar="NAME=PYTHONPATH")
    ap.add_argument("--tune", action="store_true",
                    help="compare self-tuning on (tuned) with SMG_FAST_TUNE=0 (fixed)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --compare's worker
    args = ap.parse_args()
    if not args.compare and not args.tune:
        res = measure(args.runs, args.wall)
        print(json.dumps(res) if args.json else table({"this": res}))
        return
    # name -> environment changes (SMG_FAST_TUNE None: unset)
    variants: dict[str, dict[str, str | None]]
    if args.tune:
        variants = {"tuned": {"SMG_FAST_TUNE": None}, "fixed": {"SMG_FAST_TUNE": "0"}}
    else:
        variants = {name: {"PYTHONPATH": path}
                    for name, path in (item.split("=", 1) for item in args.compare)}
    cmd = ["--json", "--runs", str(args.runs)] + (["--wall"] if args.wall else [])
    merged: dict[str, dict] = {name: {} for name in variants}
    for name, runs in run_rounds(__file__, cmd, variants, args.rounds).items():
        for run in runs:
            for case, r in run.items():
                m = merged[name].setdefault(case, {**r, "call": [], "stage": [], "copy": []})
                for k in ("call", "stage", "copy"):
                    m[k] += r[k]
    print(table(merged))


if __name__ == "__main__":
    main()
