"""Encoded bytes -> encoder input, the path users run.

1920x1080 JPEG and PNG bytes to qwen2_vl float32, next to transformers (Pillow decode +
Qwen2VLImageProcessorPil) and the decode floor, all measured interleaved in one run.

    python bench/encoded.py            # ~1-2 minutes on 2 cores
    python bench/encoded.py --rounds 9

One thread (CPU time of the fastest round, as bench/gate.py; SMG_FAST_ISA applies):
  jpeg / transformers   smg-fast on the JPEG's bytes / transformers on the same bytes
  jpeg / floor          / (libjpeg-turbo's own decode of the bytes + smg-fast on the decoded array)
  png / transformers    the same for the PNG (zlib-ng inflating when imagecodecs is installed)
Two threads (wall time, median of rounds; smg_fast.set_num_threads):
  8 jpegs 1t / 2t       one call with 8 distinct JPEGs, 1 thread over 2 threads (speed-up)
  1 jpeg 1t / 2t        one JPEG, 1 thread over 2 threads (decoded inside the native call while
                        the other thread resizes its finished rows)
  1 jpeg: 2 threads ms, overlapped / decoded ahead
                        the overlap against the same JPEG decoded before the native call
                        (prepare(); in two row bands), 2 threads, and their ratio
  8 jpegs: two 1-thread processes at once, over one (host ceiling)
                        the host's own ceiling for the 8-JPEG speed-up: two separate processes,
                        1 thread each, run the same call side by side; their combined calls per
                        second over one such process alone (no shared pool, lock or Python: what
                        is left is two cores' shared caches, memory bandwidth and neighbours)
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import simplejpeg
from gate import _timed, cpu_model, kernel_key
from PIL import Image
from references import load_photos, make_hf_pil_qwen

SIZE = (1920, 1080)


def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def _fastest(fns: dict[str, Callable[[], object]], rounds: int, timer) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(timer(fns[name]))
    finally:
        gc.enable()
    return samples


def _wall(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


_WINDOW_S = 2.5  # each side-by-side measurement window


def _side_by_side_worker(folder: str) -> None:
    """One process of the ceiling measurement.

    Loads and warms up, says "ready", waits for a line on stdin, then makes the 8-JPEG call on 1
    thread over and over for _WINDOW_S (gc off, as in-process timing has it); prints the median wall
    time of its calls."""
    import smg_fast

    smg_fast.set_num_threads(1)
    proc = smg_fast.load_processor("qwen2_vl")
    jpegs = [p.read_bytes() for p in sorted(Path(folder).glob("*.jpg"))]
    proc(jpegs)
    print("ready", flush=True)
    sys.stdin.readline()
    gc.collect()
    gc.disable()
    walls = []
    end = time.perf_counter() + _WINDOW_S
    while time.perf_counter() < end:
        walls.append(_wall(lambda: proc(jpegs)))
    print(statistics.median(walls), flush=True)


def _side_by_side(jpegs: list[bytes], rounds: int) -> float:
    """Two 1-thread processes side by side: their combined calls per second over one's alone.

    The host ceiling of the module docstring's table: alone and paired windows alternating, each
    released only once every worker is warm; the median of the paired rates over the median of the
    alone ones."""
    alone: list[float] = []
    paired: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for i, data in enumerate(jpegs):
            Path(folder, f"{i}.jpg").write_bytes(data)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        cmd = [sys.executable, __file__, "--side-by-side", folder]
        for _ in range(rounds):
            for n, into in ((1, alone), (2, paired)):
                procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          env=env, text=True) for _ in range(n)]
                try:
                    for p in procs:
                        if not select.select([p.stdout], [], [], 120)[0] or \
                                p.stdout.readline().strip() != "ready":
                            raise RuntimeError("a side-by-side worker failed to start")
                    for p in procs:
                        p.stdin.write("go\n")
                        p.stdin.flush()
                    outs = [p.communicate(timeout=120)[0] for p in procs]
                    if any(p.returncode for p in procs):
                        raise RuntimeError("a side-by-side worker failed")
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
                into.append(sum(1 / float(o) for o in outs))  # calls per second together
    return statistics.median(paired) / statistics.median(alone)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--side-by-side", help=argparse.SUPPRESS)  # a worker of _side_by_side
    args = ap.parse_args(argv)
    if args.side_by_side:
        _side_by_side_worker(args.side_by_side)
        return 0

    import smg_fast
    from smg_fast.imaging import decoders

    photo = load_photos([SIZE])[SIZE]
    jpeg = _encode(photo, "JPEG", quality=90)  # 4:2:0, Pillow's default
    png = _encode(photo, "PNG")
    proc = smg_fast.load_processor("qwen2_vl")
    hf = make_hf_pil_qwen("qwen2_vl")

    def reference(data: bytes) -> np.ndarray:
        return np.asarray(hf(Image.open(io.BytesIO(data)), return_tensors="np")["pixel_values"])

    def floor() -> object:
        return proc(simplejpeg.decode_jpeg(jpeg, fastdct=False, fastupsample=False))

    before = smg_fast.get_num_threads()
    try:
        smg_fast.set_num_threads(1)
        for data in (jpeg, png):  # exact, and warm
            if not np.array_equal(reference(data), proc(data)["pixel_values"]):
                raise AssertionError("the reference's output differs from smg-fast's")
        one = {"jpeg": lambda: proc(jpeg), "jpeg floor": floor, "png": lambda: proc(png)}
        for fn in one.values():
            fn()
        fast = _fastest(one, args.rounds, _timed)
        refs = _fastest({"jpeg ref": lambda: reference(jpeg), "png ref": lambda: reference(png)},
                        max(3, args.rounds // 3), _timed)
        best = {k: min(v) for k, v in {**fast, **refs}.items()}

        distinct = [_encode(photo.rotate(0.5 * i), "JPEG", quality=90) for i in range(8)]
        walls: dict[str, list[float]] = {}
        for threads in (1, 2, 1, 2):
            smg_fast.set_num_threads(threads)
            proc(distinct)
            fns = {f"8 {threads}": lambda: proc(distinct), f"1 {threads}": lambda: proc(jpeg)}
            if threads == 2:
                fns["ahead 2"] = lambda: proc.prepare(jpeg, "float32").compute()
            got = _fastest(fns, max(3, args.rounds // 3), _wall)
            for k, v in got.items():
                walls.setdefault(k, []).extend(v)
    finally:
        smg_fast.set_num_threads(before)
    ceiling = _side_by_side(distinct, 3)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"# {cpu_model()} | kernels {kernel_key()} | decoders {decoders.available()} "
          f"(jpeg engine {decoders.jpeg_engine()}) | "
          f"jpeg {len(jpeg)} B, png {len(png)} B | {args.rounds} rounds")
    rows = [
        ("jpeg: smg-fast ms (1 thread)", f"{best['jpeg'] * 1e3:.1f}"),
        ("jpeg: transformers ms", f"{best['jpeg ref'] * 1e3:.1f}"),
        ("jpeg: floor ms (libjpeg-turbo decode + core)", f"{best['jpeg floor'] * 1e3:.1f}"),
        ("jpeg: x transformers", f"{best['jpeg ref'] / best['jpeg']:.1f}x"),
        ("jpeg: / floor", f"{best['jpeg'] / best['jpeg floor']:.3f}"),
        ("png: smg-fast ms (1 thread)", f"{best['png'] * 1e3:.1f}"),
        ("png: transformers ms", f"{best['png ref'] * 1e3:.1f}"),
        ("png: x transformers", f"{best['png ref'] / best['png']:.1f}x"),
        ("8 jpegs: 2 threads speed-up", f"{med['8 1'] / med['8 2']:.2f}x"),
        ("1 jpeg: 2 threads speed-up", f"{med['1 1'] / med['1 2']:.2f}x"),
        ("1 jpeg: 2 threads ms, overlapped / decoded ahead",
         f"{med['1 2'] * 1e3:.1f} / {med['ahead 2'] * 1e3:.1f} "
         f"({med['ahead 2'] / med['1 2']:.2f}x)"),
        ("8 jpegs: two 1-thread processes at once, over one (host ceiling)", f"{ceiling:.2f}x"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
