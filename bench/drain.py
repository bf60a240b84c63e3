"""Callers' answers while a server drains (not part of the test command).

16 callers send one-image requests back to back; after ``--before`` answers one server is
SIGTERMed (drain timeout 5 s) and the callers go on until it has exited. Three cases: through a
router in front of three servers (a member drains); straight at one server with callers that
give up on it after 20 UNAVAILABLE answers 1 ms apart; straight at it with callers that never
give up (they keep sending through the whole drain). Per case: the answers by gRPC status and
how long the drained server took to exit. Every OK answer is checked exact.

    python bench/drain.py
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import signal
import time

import grpc
import numpy as np
from PIL import Image

from smg_fast import load_processor
from smg_fast.client import AsyncClient
from smg_fast.testing.servers import RouterProcess, ServerProcess

ARGS = ["--workers", "1", "--drain-timeout-s", "5"]


def _images(n: int) -> list[bytes]:
    rng = np.random.default_rng(3)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


async def _run(target: str, victim, imgs, refs, tries: int, before: int) -> tuple[dict, float]:
    codes: collections.Counter = collections.Counter()
    enough = asyncio.Event()
    async with AsyncClient(target) as c:
        async def caller(k: int) -> None:
            refused = 0
            while victim.proc.poll() is None:
                pick = k % len(imgs)
                k += 16
                try:
                    out = await c.preprocess([imgs[pick]], timeout=30)
                except grpc.aio.AioRpcError as exc:
                    codes[exc.code().name] += 1
                    refused += exc.code() == grpc.StatusCode.UNAVAILABLE
                    if tries and refused >= tries:
                        return
                    await asyncio.sleep(0.001)
                    continue
                assert np.array_equal(out.items[0].pixel_values, refs[pick])
                codes["OK"] += 1
                if codes["OK"] >= before:
                    enough.set()

        callers = [asyncio.ensure_future(caller(k)) for k in range(16)]
        await enough.wait()
        victim.proc.send_signal(signal.SIGTERM)
        t0 = time.perf_counter()
        await asyncio.to_thread(victim.proc.wait)
        took = time.perf_counter() - t0
        await asyncio.gather(*callers)
    return dict(codes), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=int, default=200, help="answers before the SIGTERM")
    args = ap.parse_args()
    imgs = _images(48)
    proc = load_processor("qwen2_vl")
    refs = [proc(im)["pixel_values"] for im in imgs]
    print("| case | answers by status | drained server exited after |")
    print("| --- | --- | --- |")
    for case, n, tries in (("through a router (3 members)", 3, 0),
                           ("straight, callers leave after 20 UNAVAILABLE", 1, 20),
                           ("straight, callers never leave", 1, 0)):
        servers = [ServerProcess(ARGS) for _ in range(n)]
        router = None
        try:
            for s in servers:
                s.wait()
            target = servers[0].target
            if n > 1:
                router = RouterProcess([s.target for s in servers])
                router.wait()
                target = router.target
            codes, took = asyncio.run(_run(target, servers[-1], imgs, refs, tries, args.before))
        finally:
            for p in [*servers, router]:
                if p is not None:
                    p.kill()
        shown = ", ".join(f"{k} {v}" for k, v in sorted(codes.items()))
        print(f"| {case} | {shown} | {took:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
