"""Callers' answers while a server drains (not part of the test command).

16 callers send one-image requests back to back (160x120 noise JPEGs); after ``--before`` answers
one server is SIGTERMed (drain timeout 5 s) and the callers go on until it has exited. Three
cases: through a router in front of three servers (a member drains); straight at one server with
callers that give up on it after 20 UNAVAILABLE answers 1 ms apart; straight at it with callers
that never give up (they keep sending through the whole drain). Per case: the answers by gRPC
status, and how long after the SIGTERM the last caller stopped (the drained server had exited).
Every OK answer is checked exact.

    python bench/drain.py
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np
from fleet import _images  # (bench/ is the script's directory)

from smg_fast import load_processor
from smg_fast.client import AsyncClient
from smg_fast.testing.servers import RouterProcess, ServerProcess
from smg_fast.testing.streams import stream_through_drain

ARGS = ["--workers", "1", "--drain-timeout-s", "5"]


def _run(target: str, victim, imgs, refs, tries: int, before: int) -> tuple[dict, float]:
    def check(out, k: int) -> None:
        assert np.array_equal(out.items[0].pixel_values, refs[k]), k

    async def go() -> tuple[dict, float]:
        async with AsyncClient(target) as c:
            codes, took = await stream_through_drain(c, victim.proc, imgs, check, tries=tries,
                                                     after=before)
        return dict(codes), took

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=int, default=200, help="answers before the SIGTERM")
    args = ap.parse_args()
    imgs = _images(48, seed=3)
    proc = load_processor("qwen2_vl")
    refs = [proc(im)["pixel_values"] for im in imgs]
    print("| case | answers by status | callers done after the SIGTERM |")
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
            codes, took = _run(target, servers[-1], imgs, refs, tries, args.before)
        finally:
            for p in [*servers, router]:
                if p is not None:
                    p.kill()
        shown = ", ".join(f"{k} {v}" for k, v in sorted(codes.items()))
        print(f"| {case} | {shown} | {took:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
