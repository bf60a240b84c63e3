"""The resampler's passes and the processors around them, on 1 native thread.

Not part of the test command. Random 1920x1080 content, each pass on its own (horizontal only:
1920 -> 1932 wide; vertical only: 1080 -> 1092 high; Pillow's and torch's weights), RGBX, a strong
downscale, and the qwen2_vl processor (PIL image, float32) with the pil and torchvision backends.
Every case runs once per round, all cases interleaved, timed in process CPU time; medians and
minimums in ms. Compare kernel sets with SMG_FAST_ISA (avx2, baseline, ...), one process each;
--tune compares self-tuning on with SMG_FAST_TUNE=0 (the fixed order), a fresh process per
variant and round, in turn, with the resample choices the tuner made.

    SMG_FAST_ISA=avx2 python bench/resample_passes.py [--rounds 21] [--only SUBSTRING]
    python bench/resample_passes.py --tune [--rounds 7] [--per-process 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from PIL import Image
from side_by_side import run_rounds

import smg_fast
from smg_fast import _native

F, P, R = _native.Filter, _native.PassOrder, _native.Resampler


def cases() -> dict[str, object]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    rgbx = np.ascontiguousarray(np.dstack([img, np.zeros_like(img[..., :1])]))
    big = rng.integers(0, 256, (3000, 4000, 3), dtype=np.uint8)
    photo = Image.fromarray(img)
    pil = smg_fast.load_processor("qwen2_vl")
    tv = smg_fast.load_processor("qwen2_vl", backend="torchvision")
    h, v = P.HORIZONTAL_FIRST, F.BICUBIC
    return {
        "horizontal 1920->1932 RGB": lambda: _native.resize(img, 1932, 1080, v, h),
        "vertical 1080->1092 RGB": lambda: _native.resize(img, 1920, 1092, v, h),
        "horizontal torch weights": lambda: _native.resize(img, 1932, 1080, v, h, R.TORCH),
        "vertical torch weights": lambda: _native.resize(img, 1920, 1092, v, h, R.TORCH),
        "horizontal 1920->1932 RGBX": lambda: _native.resize(rgbx, 1932, 1080, v, h),
        "4000x3000 -> 1000x750 RGB": lambda: _native.resize(big, 1000, 750, v, h),
        "qwen2_vl pil float32": lambda: pil([photo]),
        "qwen2_vl torchvision float32": lambda: tv([photo]),
    }


def measure(rounds: int, only: str) -> dict[str, list[float]]:
    """Per case, the CPU seconds of each round's call on one native thread."""
    smg_fast.set_num_threads(1)
    todo = {name: fn for name, fn in cases().items() if only in name}
    times: dict[str, list[float]] = {name: [] for name in todo}
    for fn in todo.values():
        fn()  # warm-up: pools filled, pages touched, classes tuned
    for _ in range(rounds):
        for name, fn in todo.items():
            t = time.process_time()
            fn()
            times[name].append(time.process_time() - t)
    return times


def compare_tuning(rounds: int, per_process: int, only: str) -> None:
    """Tuned against fixed, side by side; then the resample choices a tuned process made."""
    variants = {"tuned": {"SMG_FAST_TUNE": None}, "fixed": {"SMG_FAST_TUNE": "0"}}
    args = ["--json", "--rounds", str(per_process), "--only", only]
    runs = run_rounds(__file__, args, variants, rounds)
    merged = {name: {} for name in variants}
    for name, results in runs.items():
        for r in results:
            for case, ts in r["times"].items():
                merged[name].setdefault(case, []).extend(ts)
    info = runs["tuned"][-1]["info"]
    print(f"{rounds} rounds x {per_process} calls per process, SMG_FAST_ISA cap {info['isa_cap']},"
          " CPU ms, medians: tuned / fixed (fixed over tuned)")
    for case, ts in merged["tuned"].items():
        t, f = statistics.median(ts), statistics.median(merged["fixed"][case])
        print(f"  {case:<30} {t * 1e3:7.2f} / {f * 1e3:7.2f}  ({f / t:.2f}x)")
    print("resample choices (tuned):")
    for c in info["tuning"]["choices"]:
        if c["stage"].startswith("resample."):
            us = ", ".join(f"{k} {v:.1f}" for k, v in c["median_us"].items())
            print(f"  {c['stage']:<20} {c['key']:<24} -> {c['kernel']:<10} ({us} us)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--tune", action="store_true",
                    help="compare self-tuning on with SMG_FAST_TUNE=0, fresh processes in turn")
    ap.add_argument("--per-process", type=int, default=5,
                    help="--tune: timed rounds in each process (default 5)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # --tune's worker
    args = ap.parse_args()
    if args.tune:
        compare_tuning(args.rounds, args.per_process, args.only)
        return
    times = measure(args.rounds, args.only)
    info = smg_fast.kernel_info()
    if args.json:
        print(json.dumps({"times": times, "info": info}))
        return
    print(f"kernels ran: {info['ran']} (SMG_FAST_ISA cap {info['isa_cap']}), "
          f"{args.rounds} rounds, ms")
    for name, ts in times.items():
        print(f"  {name:<30} median {statistics.median(ts) * 1e3:7.2f}  min {min(ts) * 1e3:7.2f}")


if __name__ == "__main__":
    main()
