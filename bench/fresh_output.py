"""What fresh output memory costs a processor call: outputs dropped (pool reused) vs kept.

An engine keeps each call's output (vLLM's processor cache), so every call writes memory the
kernel has to fault in; a caller that drops its outputs gets the pool's pages back. The gap is
the host's page-fault cost, the same for any processor that returns a new buffer.

    PYTHONPATH=src python bench/fresh_output.py [--rounds N] [--size 1920x1080]

One thread, JPEG bytes in (scikit-image's photo resized, distinct per round), Qwen2-VL's hub
config with torchvision numerics (vLLM's default class), uint8 and float32 outputs; median CPU
ms per call, and the host's cost of first writing fresh anonymous 4 KiB pages.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engines import cpu_model, fresh_page_ms_per_mb  # noqa: E402
from references import photo_file  # noqa: E402


def _jpegs(width: int, height: int, count: int) -> list[bytes]:
    """Distinct JPEGs of the benchmark photo at width x height."""
    from PIL import Image

    with Image.open(photo_file()) as im:
        base = im.convert("RGB")
    out = []
    for i in range(count):
        buf = io.BytesIO()
        base.rotate(0.25 * i).resize((width, height)).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="timed calls per arm")
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT of the JPEGs")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    import smg_fast
    from smg_fast import _native

    _native.set_num_threads(1)
    proc = smg_fast.load_processor("qwen2_vl", backend="torchvision")
    jpegs = _jpegs(width, height, args.rounds + 2)
    print(f"CPU: {cpu_model()}; one thread; Qwen2-VL torchvision numerics; {width}x{height} JPEG; "
          f"fresh 4 KiB pages {fresh_page_ms_per_mb():.2f} ms/MB")
    print(f"{'dtype':8} {'output MB':>9} {'dropped ms':>10} {'kept ms':>8} {'fault ms/MB':>11}")
    for dtype in ("uint8", "float32"):
        costs: dict[str, float] = {}
        kept: list[object] = []
        nbytes = 0
        for arm in ("dropped", "kept"):
            times = []
            for data in jpegs:
                start = time.process_time()
                out = proc([data], dtype=dtype)
                times.append((time.process_time() - start) * 1e3)
                nbytes = out["pixel_values"].nbytes
                if arm == "kept":
                    kept.append(out)
                del out
            costs[arm] = statistics.median(times[2:])
        megabytes = nbytes / 1e6
        print(f"{dtype:8} {megabytes:9.1f} {costs['dropped']:10.1f} {costs['kept']:8.1f} "
              f"{(costs['kept'] - costs['dropped']) / megabytes:11.2f}")
        del kept
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
