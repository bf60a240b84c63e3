"""Load generator for a running smg-fast server.

    python -m smg_fast.bench.load --target 127.0.0.1:50051 --concurrency 8 --seconds 20 \\
        --transport shm [--image photo.jpg ...] [--unique]

Each of ``--concurrency`` workers sends one image per request in a loop for ``--seconds``,
materializing every result (shm segments are mapped and unlinked, as a consumer would). Prints
req/s, MB/s of tensor bytes received and p50/p99 latency. ``--unique`` appends a few bytes after
the image's end (decoders ignore them) so every request has a new content hash: a cache-enabled
server then misses every time. Without ``--image`` the input is a 1920x1080 JPEG made from the
built-in test pattern.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    nbytes: int = 0
    errors: int = 0
    hits: int = 0
    first_error: str = ""


def _bar(done: float, total: float, count: int, width: int = 30) -> str:
    frac = min(1.0, done / total) if total > 0 else 1.0
    filled = int(frac * width)
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {done:5.1f}/{total:.0f} s {count:7d} req"


async def run_load(target: str, images: list[bytes], *, concurrency: int, seconds: float,
                   transport: str, dtype: str, model: str | None, unique: bool,
                   progress: bool = True) -> tuple[Stats, float]:
    from ..client import AsyncClient

    stats = Stats()
    async with AsyncClient(target, timeout=120) as client:
        if transport == "rdma":
            info = await client.model_info()
            if info.get("rdma_available"):
                from ..transport.rdma import Puller

                # One landing slot per worker, each fitting the server's largest tensor.
                client.puller = Puller(slots=concurrency,
                                       slot_bytes=int(info["rdma_max_bytes"]) + 4096)
        await client.preprocess(images[0], model=model, dtype=dtype, transport=transport)
        start = time.perf_counter()
        deadline = start + seconds
        counter = [0]

        async def worker(k: int) -> None:
            i = k
            while time.perf_counter() < deadline:
                data = images[i % len(images)]
                if unique:
                    data = data + b"smg-fast-load-%d-%d" % (k, i)
                i += concurrency
                t0 = time.perf_counter()
                try:
                    out = await client.preprocess(data, model=model, dtype=dtype,
                                                  transport=transport)
                except Exception as exc:  # counted and reported, the load goes on
                    stats.errors += 1
                    stats.first_error = stats.first_error or repr(exc)
                    continue
                stats.latencies.append(time.perf_counter() - t0)
                stats.nbytes += sum(int(it.pixel_values.nbytes) for it in out.items)
                stats.hits += sum(it.cache_hit for it in out.items)
                counter[0] += 1
                del out  # done with it: a reused shm segment goes back to the server

        async def show() -> None:
            while True:
                now = time.perf_counter()
                print(_bar(min(now - start, seconds), seconds, counter[0]), end="",
                      file=sys.stderr, flush=True)
                if now >= deadline:
                    return
                await asyncio.sleep(0.25)

        tasks = [asyncio.ensure_future(worker(k)) for k in range(concurrency)]
        bar = asyncio.ensure_future(show()) if progress else None
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        if bar is not None:
            await bar
            print(file=sys.stderr)
    return stats, elapsed


def report(stats: Stats, elapsed: float) -> str:
    n = len(stats.latencies)
    if n == 0:
        return f"no successful request ({stats.errors} errors: {stats.first_error})"
    lat = sorted(stats.latencies)
    p50 = statistics.median(lat)
    p99 = lat[min(n - 1, int(round(0.99 * (n - 1))))]
    line = (f"{n / elapsed:.1f} req/s  {stats.nbytes / elapsed / 1e6:.1f} MB/s  "
            f"p50 {p50 * 1e3:.2f} ms  p99 {p99 * 1e3:.2f} ms  ({n} requests, "
            f"{stats.hits} cache hits, {stats.errors} errors, {elapsed:.1f} s)")
    if stats.errors:
        line += f"\nfirst error: {stats.first_error}"
    return line


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of pid so far (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m smg_fast.bench.load",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--transport", default="auto",
                    choices=["", "inline", "shm", "auto", "rdma"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--image", action="append", default=None,
                    help="image file (repeatable; default: a built-in 1920x1080 JPEG)")
    ap.add_argument("--unique", action="store_true",
                    help="make every request's bytes unique (always a cache miss)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--server-pid", type=int, default=0,
                    help="also report this process's CPU time per request (user + system, "
                         "from /proc/PID/stat over the timed part: a server on this host)")
    args = ap.parse_args(argv)
    if args.concurrency < 1 or args.seconds <= 0:
        ap.error("--concurrency must be >= 1 and --seconds > 0")
    images = []
    for path in args.image or []:
        with open(path, "rb") as fh:
            images.append(fh.read())
    if not images:
        from ..imaging.sample import sample_image_bytes

        images = [sample_image_bytes()]
    cpu0 = _cpu_seconds(args.server_pid) if args.server_pid else 0.0
    stats, elapsed = asyncio.run(run_load(
        args.target, images, concurrency=args.concurrency, seconds=args.seconds,
        transport=args.transport, dtype=args.dtype, model=args.model, unique=args.unique,
        progress=not args.no_progress))
    print(f"target {args.target} transport {args.transport or 'default'} dtype {args.dtype} "
          f"concurrency {args.concurrency}{' unique' if args.unique else ''}")
    print(report(stats, elapsed))
    if args.server_pid and stats.latencies:
        cpu = _cpu_seconds(args.server_pid) - cpu0  # (includes the untimed first request)
        print(f"server CPU {cpu:.2f} s: {cpu / (len(stats.latencies) + 1) * 1e3:.1f} ms per "
              "request")
    return 0 if stats.latencies and not stats.errors else 1


if __name__ == "__main__":
    sys.exit(main())
