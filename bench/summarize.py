"""Markdown summary of a bench/ run.

    python -m pytest bench/ --benchmark-only --benchmark-json=/tmp/bench.json -q
    python bench/summarize.py /tmp/bench.json

One row per family and input size: median milliseconds of the reference (transformers' PIL
processor for Qwen, the upstream NumPy reference for Kimi), the torchvision processor ("n/a" when
it was not run), smg-fast on 1 thread (float32, bfloat16) and on all threads (float32), and the
copy floor (np.copyto of the float32 output), then reference / smg(1t f32) and smg(1t f32) / copy.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

IMPLS = ("reference", "torchvision", "smg_f32_1t", "smg_bf16_1t", "smg_f32_all", "copy_floor")
FAMILY_ORDER = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25")
# Other processes using this many cores on average during a benchmark mark it as disturbed.
DISTURBED_CORES = 0.25


def _size_key(size: str) -> tuple[int, int]:
    w, _, h = size.partition("x")
    return (int(w) * int(h), int(w)) if w.isdigit() and h.isdigit() else (0, 0)


def _family_key(family: str) -> tuple[int, str]:
    return (FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER), family)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    ms = seconds * 1e3
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def _ratio(num: float | None, den: float | None) -> str:
    if num is None or not den:
        return "n/a"
    return f"{num / den:.1f}x"


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def collect(data: dict):
    """{(family, size): {impl: benchmark dict}} from the benchmarks' extra_info."""
    rows: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info", {})
        impl, family, size = info.get("impl"), info.get("family"), info.get("size")
        if impl in IMPLS and family and size:
            rows[(family, size)][impl] = bench
    return rows


def table(rows) -> list[str]:
    lines = [
        "| family | size | output MB (f32) | reference ms | torchvision ms | smg 1t f32 ms "
        "| smg 1t bf16 ms | smg all f32 ms | copy floor ms | reference / smg 1t "
        "| smg 1t / copy |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for family, size in sorted(rows, key=lambda k: (_family_key(k[0]), _size_key(k[1]))):
        impls = rows[(family, size)]
        med = {name: impls[name]["stats"]["median"] if name in impls else None for name in IMPLS}
        f32 = [b for b in impls.values() if b["extra_info"].get("dtype") == "float32"]
        mb = f32[0]["extra_info"].get("output_mb") if f32 else None
        cells = [
            family, size, f"{mb:.1f}" if mb is not None else "n/a",
            *(_ms(med[name]) for name in IMPLS),
            _ratio(med["reference"], med["smg_f32_1t"]),
            _ratio(med["smg_f32_1t"], med["copy_floor"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def notes(data: dict, rows) -> list[str]:
    out = []
    refs = sorted({b["extra_info"]["reference"] for impls in rows.values()
                   for name, b in impls.items() if name == "reference"
                   and "reference" in b["extra_info"]})
    if refs:
        out.append("Reference: " + "; ".join(refs) + ".")
    tv = sorted({b["extra_info"].get("reference", "?") for impls in rows.values()
                 for name, b in impls.items() if name == "torchvision"})
    out.append("torchvision: " + (", ".join(tv) + ", torch.set_num_threads(1)." if tv
                                  else "not run (torchvision not installed)."))
    threads = sorted({b["extra_info"].get("threads") for impls in rows.values()
                      for name, b in impls.items() if name == "smg_f32_all"} - {None})
    if threads:
        out.append(f"smg all threads = {', '.join(map(str, threads))} native threads.")
    mi = data.get("machine_info", {})
    cpu = mi.get("cpu", {}).get("brand_raw") if isinstance(mi.get("cpu"), dict) else None
    desc = [f"{mi.get('cpu_count', '?')} CPUs"]
    if cpu:
        desc.insert(0, cpu)
    if mi.get("python_version"):
        desc.append(f"Python {mi['python_version']}")
    out.append("Machine: " + ", ".join(desc) + f"; run {data.get('datetime', '?')}.")
    suite = data.get("suite") or {}
    if suite:
        line = (f"Suite wall time {suite.get('wall_s', '?')} s "
                f"(own CPU {suite.get('own_cpu_s', '?')} s")
        if "others_cores" in suite:
            line += (f"; other processes used {suite['others_cpu_s']} CPU-s, "
                     f"{suite['others_cores']} cores on average")
        out.append(line + ").")
    disturbed = []
    for (family, size), impls in rows.items():
        for name, b in impls.items():
            cores = b["extra_info"].get("others_cores")
            if cores is not None and cores > DISTURBED_CORES:
                disturbed.append((cores, f"{family}-{size} {name}"))
    if disturbed:
        total = sum(len(impls) for impls in rows.values())
        worst = ", ".join(f"{n} ({c:.2f})" for c, n in sorted(disturbed, reverse=True)[:5])
        out.append(f"DISTURBED: in {len(disturbed)} of {total} benchmarks other processes used "
                   f"more than {DISTURBED_CORES} cores on average (worst: {worst}). Medians "
                   "from this run are inflated; rerun on an idle machine before quoting them.")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="file written by pytest --benchmark-json=FILE")
    args = parser.parse_args(argv)
    data = load(args.json)
    rows = collect(data)
    if not rows:
        print(f"{args.json}: no bench/ processor benchmarks found", file=sys.stderr)
        return 1
    print("\n".join(table(rows)))
    print()
    for line in notes(data, rows):
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
