"""Markdown summary of a bench/ run.

    python -m pytest bench/ --benchmark-only --benchmark-json=/tmp/bench.json -q
    python bench/summarize.py /tmp/bench.json

One row per family and input size: median milliseconds of the reference (transformers' PIL
processor for Qwen, the upstream NumPy reference for Kimi), the torchvision processor ("n/a" when
it was not run), smg-fast on 1 thread (float32, bfloat16) and on all threads (float32), and the
copy floor (np.copyto of the float32 output), then reference / smg(1t f32) and smg(1t f32) / copy.
Transport benchmarks (bench/test_bench_transports.py) get their own tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

IMPLS = ("reference", "torchvision", "smg_f32_1t", "smg_bf16_1t", "smg_f32_all", "copy_floor")
FAMILY_ORDER = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25", "glm4v", "glm46v")
FAMILY_ORDER += ("paddleocr_vl", "ernie4_5_vl_moe", "hunyuan_vl")
FAMILY_ORDER += ("gemma3",)
FAMILY_ORDER += ("kimi_vl",)
FAMILY_ORDER += ("internvl",)
FAMILY_ORDER += ("pixtral",)
FAMILY_ORDER += ("llava_next", "llava_onevision")
FAMILY_ORDER += ("idefics3",)
# Other processes using this many cores on average during a benchmark mark it as disturbed.
DISTURBED_CORES = 0.25
# A benchmark whose first-half and second-half medians differ by more than this fraction changed
# speed while it ran (e.g. noise from outside this machine's process list: host, neighbours).
SHIFT_FRACTION = 0.2
# Families whose built-in configs are identical: their medians measure the run-to-run noise.
TWINS = ("qwen2_vl", "qwen2_5_vl")


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
    shifted = []
    for (family, size), impls in rows.items():
        for name, b in impls.items():
            data = b["stats"].get("data") or []
            if len(data) >= 6:
                half = len(data) // 2
                a, c = _median(data[:half]), _median(data[half:])
                if min(a, c) > 0 and max(a, c) / min(a, c) > 1 + SHIFT_FRACTION:
                    shifted.append(f"{family}-{size} {name} ({_ms(a)} -> {_ms(c)} ms)")
    if shifted:
        out.append(f"SHIFTED: {len(shifted)} benchmarks changed speed by more than "
                   f"{SHIFT_FRACTION:.0%} between the first and second half of their rounds: "
                   + "; ".join(shifted) + ".")
    twin_diffs = []
    for (family, size), impls in rows.items():
        if family != TWINS[0] or (TWINS[1], size) not in rows:
            continue
        other = rows[(TWINS[1], size)]
        for name in impls.keys() & other.keys():
            a, c = impls[name]["stats"]["median"], other[name]["stats"]["median"]
            if min(a, c) > 0:
                twin_diffs.append((max(a, c) / min(a, c) - 1, f"{size} {name}"))
    if twin_diffs:
        worst, where = max(twin_diffs)
        out.append(f"Noise check: {TWINS[0]} and {TWINS[1]} run identical configs; their medians "
                   f"differ by up to {worst:.0%} ({where}).")
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def transport_tables(data: dict) -> list[str]:
    """Payload rows (median ms and GB/s per transport) and 1080p end-to-end rows, when present."""
    payload: dict[int, dict[str, float]] = defaultdict(dict)
    e2e: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in data.get("benchmarks", []):
        info, median = bench.get("extra_info", {}), bench["stats"]["median"]
        if "e2e" in info:
            e2e[info["dtype"]][info["transport"]] = median
        elif "transport" in info and "mb" in info:
            payload[int(info["mb"])][info["transport"]] = median
    out: list[str] = []
    if payload:
        kinds = ("rdma", "shm", "inline")
        out += ["| MiB | " + " | ".join(f"{k} ms (GB/s)" for k in kinds) + " |",
                "| ---: | " + " | ".join("---:" for _ in kinds) + " |"]
        for mb in sorted(payload):
            cells = []
            for k in kinds:
                t = payload[mb].get(k)
                cells.append("n/a" if t is None else f"{t * 1e3:.2f} ({mb * 2**20 / t / 1e9:.1f})")
            out.append(f"| {mb} | " + " | ".join(cells) + " |")
    if e2e:
        out += ["", "| 1080p end to end | rdma ms | shm ms | rdma / shm |",
                "| --- | ---: | ---: | ---: |"]
        for dtype in sorted(e2e):
            r, m = e2e[dtype].get("rdma"), e2e[dtype].get("shm")
            out.append(f"| {dtype} | {_ms(r)} | {_ms(m)} | {_ratio(r, m)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="file written by pytest --benchmark-json=FILE")
    args = parser.parse_args(argv)
    data = load(args.json)
    rows = collect(data)
    transports = transport_tables(data)
    if not rows and not transports:
        print(f"{args.json}: no bench/ benchmarks found", file=sys.stderr)
        return 1
    if rows:
        print("\n".join(table(rows)))
        print()
        for line in notes(data, rows):
            print(f"- {line}")
    if transports:
        print("\n".join(["", *transports] if rows else transports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
