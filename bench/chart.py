"""The speed chart of docs/performance.md, drawn from that page's current tables.

    python bench/chart.py [--doc docs/performance.md] [--out docs/img/speed.png]

It invents nothing: it reads the tables that follow a marker comment in the page,

    <!-- chart: NAME | CPU | DATE | COMMAND -->

    | the table | ... |

("isa": `python bench/isa_table.py`'s per-cap table; "torchvision": `python
bench/torchvision_backend.py`'s table), and writes the CPU, the date and the commands of the
figures into the image. After a new measurement, paste the new table (and its marker) into the
page, then rerun this and commit the page and the image together. Needs matplotlib.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!-- chart: (?P<name>[^|]+)\|(?P<cpu>[^|]+)\|(?P<date>[^|]+)\|"
                    r"(?P<command>[^|]+)-->")


@dataclass
class Table:
    name: str
    cpu: str
    date: str
    command: str
    header: list[str]
    rows: list[list[str]]

    def column(self, title: str) -> list[float]:
        """A column's values as numbers ("18.6x" -> 18.6)."""
        i = self.header.index(title)
        return [float(r[i].rstrip("x")) for r in self.rows]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_tables(doc: Path) -> dict[str, Table]:
    """Each marked table of the page, by name."""
    lines = doc.read_text().splitlines()
    out: dict[str, Table] = {}
    for i, line in enumerate(lines):
        m = MARKER.fullmatch(line.strip())
        if not m:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1  # a blank line, so that Markdown renders the table after the comment
        rows = []
        while j < len(lines) and lines[j].startswith("|"):
            rows.append(_cells(lines[j]))
            j += 1
        if len(rows) < 3:
            raise SystemExit(f"{doc}:{i + 1}: marker {m['name'].strip()!r} has no table under it")
        out[m["name"].strip()] = Table(m["name"].strip(), m["cpu"].strip(), m["date"].strip(),
                                       m["command"].strip(), rows[0], rows[2:])
    return out


def draw(tables: dict[str, Table], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    isa, tv = tables["isa"], tables["torchvision"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2), dpi=100)

    labels = [f"{r[0]}\n{r[1]}" for r in isa.rows]
    x = np.arange(len(labels))
    for k, (col, colour) in enumerate([("avx2: x transformers", "#1f77b4"),
                                       ("baseline: x transformers", "#aec7e8")]):
        vals = isa.column(col)
        bars = left.bar(x + (k - 0.5) * 0.38, vals, 0.38, label=col.split(":")[0], color=colour)
        left.bar_label(bars, labels=[f"{v:g}x" for v in vals], fontsize=7, padding=1)
    left.set_xticks(x, labels, fontsize=8)
    left.set_ylabel("times faster than the reference (1 thread)")
    left.set_title("PIL / upstream backend, 1920x1080, per kernel set\n(reference: transformers' "
                   "Qwen2VLImageProcessorPil; Kimi: its NumPy code)", fontsize=9)
    left.legend(title="SMG_FAST_ISA", fontsize=8)

    fams = [r[0] for r in tv.rows]
    x = np.arange(len(fams))
    series = [("transformers torchvision ms", "transformers (torchvision)", "#d62728"),
              ("smg f32 ms", "smg-fast float32", "#1f77b4"),
              ("smg bf16 ms", "smg-fast bfloat16", "#2ca02c"),
              ("copy floor ms", "copy of the output", "#7f7f7f")]
    for k, (col, name, colour) in enumerate(series):
        vals = tv.column(col)
        bars = right.bar(x + (k - 1.5) * 0.2, vals, 0.2, label=name, color=colour)
        right.bar_label(bars, labels=[f"{v:g}" for v in vals], fontsize=7, padding=1)
    right.set_xticks(x, fams, fontsize=8)
    right.set_ylabel("ms per image, 1 thread (median)")
    right.set_title("torchvision backend, 1920x1080", fontsize=10)
    right.legend(fontsize=8)

    cpus = sorted({isa.cpu, tv.cpu})
    dates = sorted({isa.date, tv.date})
    fig.suptitle(f"smg-fast speed, one image: {', '.join(cpus)}, measured {', '.join(dates)}",
                 fontsize=11)
    fig.text(0.01, 0.01, f"Left: `{isa.command}`. Right: `{tv.command}`. "
             "Figures: the current tables of docs/performance.md; chart: python bench/chart.py.",
             fontsize=7, color="#444444")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    out.parent.mkdir(parents=True, exist_ok=True)
    # no timestamp in the file, so redrawing the same tables gives the same bytes
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "speed.png")
    args = ap.parse_args()
    tables = read_tables(args.doc)
    missing = {"isa", "torchvision"} - set(tables)
    if missing:
        raise SystemExit(f"{args.doc}: no marked table for {sorted(missing)}")
    draw(tables, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
