"""A steady stream of requests while a server drains: what its callers are answered.

The drain tests (tests/routing/test_routing_drain.py) and bench/drain.py share it."""

from __future__ import annotations

import asyncio
import collections
import signal
import subprocess
from collections.abc import Callable
from typing import Any


async def stream_through_drain(client: Any, victim: subprocess.Popen, imgs: list[bytes],
                               check: Callable[[Any, int], None], *, streams: int = 16,
                               tries: int = 0,
                               after: int = 40) -> tuple[collections.Counter, float]:
    """streams callers sending one image each, back to back, until victim has exited.

    victim is SIGTERMed once ``after`` requests were answered OK (each answer goes through
    check(out, index of its image)). With ``tries``, a caller answered UNAVAILABLE tries again
    1 ms later, at most that many times in all, then leaves (as a client whose retry policy gives
    up on a replica); without, it never leaves. Returns the answers by gRPC status name, and the
    seconds from the SIGTERM until the last caller stopped (the victim had exited)."""
    import grpc

    loop = asyncio.get_running_loop()
    sent_at = 0.0

    codes: collections.Counter = collections.Counter()
    enough = asyncio.Event()

    async def caller(k: int) -> None:
        refused = 0
        while victim.poll() is None:
            pick = k % len(imgs)
            k += streams
            try:
                out = await client.preprocess([imgs[pick]], timeout=30)
            except grpc.aio.AioRpcError as exc:
                codes[exc.code().name] += 1
                refused += exc.code() == grpc.StatusCode.UNAVAILABLE
                if tries and refused >= tries:
                    return
                await asyncio.sleep(0.001)
                continue
            check(out, pick)
            codes["OK"] += 1
            if codes["OK"] >= after:
                enough.set()

    async def term() -> None:
        nonlocal sent_at
        await enough.wait()
        victim.send_signal(signal.SIGTERM)
        sent_at = loop.time()

    callers = [asyncio.ensure_future(caller(k)) for k in range(streams)]
    killer = asyncio.ensure_future(term())
    try:
        await asyncio.gather(*callers)
    finally:
        killer.cancel()
    return codes, loop.time() - sent_at
