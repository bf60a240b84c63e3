"""The speed table per instruction-set cap of docs/performance.md, from one run.

For each SMG_FAST_ISA cap this host can run (avx512 only where the CPU has it, then avx2,
baseline), bench/gate.py's measurement (1920x1080, one thread, CPU time interleaved with the
exact reference and the copy floor) in a child process, since the cap is read once per process.

    python bench/isa_table.py [--rounds N]

Prints a markdown table: per family and dtype, "x transformers" (reference time / smg-fast time;
the NumPy reference for Kimi) and "x copy" (smg-fast time / copy floor) under each cap.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CAPS = ("avx512", "avx2", "baseline")


def _child(out: Path, rounds: int) -> int:
    from gate import FAMILIES, SIZE, measure
    from references import load_photos

    import smg_fast

    photo = load_photos([SIZE])[SIZE]
    ratios = measure(FAMILIES, photo, rounds)
    info = smg_fast.kernel_info()
    out.write_text(json.dumps({"ratios": ratios, "selected": info["selected"]}))
    return 0


def caps_here() -> list[str]:
    import smg_fast

    host = smg_fast.kernel_info()["host"]
    return [c for c in CAPS if c != "avx512" or host["avx512"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds per family (default 15)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.child is not None:
        return _child(args.child, args.rounds)

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for cap in caps_here():
            out = Path(tmp, f"{cap}.json")
            subprocess.run([sys.executable, __file__, "--child", str(out), "--rounds",
                            str(args.rounds)], env=dict(os.environ, SMG_FAST_ISA=cap), check=True)
            results[cap] = json.loads(out.read_text())
    caps = list(results)
    for cap in caps:
        print(f"{cap}: kernels {results[cap]['selected']}")
    print()
    print("| family | dtype | " + " | ".join(f"{c}: x transformers | {c}: x copy" for c in caps)
          + " |")
    print("|---|---|" + "--:|--:|" * len(caps))
    metrics = results[caps[0]]["ratios"]
    for family, dtype in dict.fromkeys(tuple(m.split(" ")[:2]) for m in metrics):
        cells = []
        for cap in caps:
            r = results[cap]["ratios"]
            cells += [f"{1 / r[f'{family} {dtype} / ref']:.1f}x",
                      f"{r[f'{family} {dtype} / copy']:.2f}x"]
        print(f"| {family} | {dtype} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
