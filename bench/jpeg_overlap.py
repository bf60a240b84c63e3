"""One 1080p JPEG to qwen2_vl float32 on 2 threads.

Its decode overlapped with its resize (a plain call) against decoding it first, in two row bands,
then running the core (prepare()). Wall and CPU time per call, medians of alternating calls in one
process.

    python bench/jpeg_overlap.py [--calls 40]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time

from references import load_photos


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args(argv)
    import smg_fast

    buf = io.BytesIO()
    load_photos([(1920, 1080)])[(1920, 1080)].save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    proc = smg_fast.load_processor("qwen2_vl")
    before = smg_fast.get_num_threads()
    smg_fast.set_num_threads(2)
    fns = {"overlapped": lambda: proc(data),
           "decoded ahead": lambda: proc.prepare(data, "float32").compute()}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    try:
        for fn in fns.values():
            fn()
        for r in range(args.calls):
            for name in (list(fns) if r % 2 else list(fns)[::-1]):
                t0, c0 = time.perf_counter(), time.process_time()
                fns[name]()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    finally:
        smg_fast.set_num_threads(before)
    for name in fns:
        print(f"{name:14s} wall {statistics.median(wall[name]) * 1e3:6.1f} ms   "
              f"CPU {statistics.median(cpu[name]) * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
