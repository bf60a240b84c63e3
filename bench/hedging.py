"""A hung member under a steady load, with and without hedging (not part of the test command).

Three servers on loopback, ``--concurrency`` callers each sending one-image requests back to back
(distinct small JPEG crops, so the caches do not hide the members); first ``--requests`` with
every member well (the healthy p99), then as many with one member SIGSTOPped (its sockets stay
open, nothing answers). Per mode (the library's defaults with hedging, then with
``hedge_percentile=0``; keepalive at its default 10 s in both): p50, p99 and the slowest request
in each phase, failures, and the hedges sent / won. Every answer is checked exact against the
in-process processor.

    python bench/hedging.py --requests 400
"""

from __future__ import annotations

import argparse
import asyncio
import io
import signal
import time

import numpy as np
from PIL import Image

from smg_fast import load_processor
from smg_fast.routing import AsyncRoutedClient, RoutedError
from smg_fast.testing.servers import ServerProcess


def _images(n: int) -> list[bytes]:
    rng = np.random.default_rng(7)
    base = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    out = []
    for i in range(n):
        x, y = 7 * i % 480, 5 * i % 360
        buf = io.BytesIO()
        Image.fromarray(base[y:y + 120, x:x + 160]).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


async def _phase(fleet, imgs, refs, requests: int, concurrency: int) -> tuple[list[float], int]:
    queue = list(range(requests))
    lat: list[float] = []
    failed = 0

    async def caller() -> None:
        nonlocal failed
        while queue:
            k = queue.pop() % len(imgs)
            t0 = time.perf_counter()
            try:
                out = await fleet.preprocess([imgs[k]], timeout=60)
            except RoutedError:
                failed += 1
                continue
            lat.append(time.perf_counter() - t0)
            assert np.array_equal(out.items[0].pixel_values, refs[k]), k

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return lat, failed


def _ms(lat: list[float], q: float) -> float:
    return 1000 * float(np.quantile(lat, q)) if lat else float("nan")


async def _mode(name: str, servers, imgs, refs, args, **kw) -> None:
    hung = servers[2]
    async with AsyncRoutedClient([s.target for s in servers], **kw) as fleet:
        await _phase(fleet, imgs, refs, args.requests // 2, args.concurrency)  # warm
        well, f1 = await _phase(fleet, imgs, refs, args.requests, args.concurrency)
        hung.proc.send_signal(signal.SIGSTOP)
        try:
            sick, f2 = await _phase(fleet, imgs, refs, args.requests, args.concurrency)
        finally:
            hung.proc.send_signal(signal.SIGCONT)
        h = fleet.stats()["hedges"]
    print(f"| {name} | {_ms(well, .5):.1f} | {_ms(well, .99):.1f} | {_ms(sick, .5):.1f} | "
          f"{_ms(sick, .99):.1f} | {1000 * max(sick):.0f} | {f1 + f2} | "
          f"{h['sent']} / {h['won']} |", flush=True)
    await asyncio.sleep(2.0)  # the resumed member answers again before the next mode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1, help="worker threads per server")
    args = ap.parse_args()
    imgs = _images(64)
    proc = load_processor("qwen2_vl")
    refs = [proc(im)["pixel_values"] for im in imgs]
    servers = [ServerProcess(["--workers", str(args.workers)]) for _ in range(3)]
    try:
        for s in servers:
            s.wait()
        print("| mode | healthy p50 ms | healthy p99 ms | one hung p50 ms | one hung p99 ms | "
              "slowest ms | failed | hedges sent / won |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        asyncio.run(_mode("hedging (default)", servers, imgs, refs, args))
        asyncio.run(_mode("no hedging", servers, imgs, refs, args, hedge_percentile=0))
    finally:
        for s in servers:
            s.proc.send_signal(signal.SIGCONT)
            s.kill()


if __name__ == "__main__":
    main()
