"""Drains as callers see them: no call ends CANCELLED, none fails through a router.

A steady stream of requests straight at a server that is SIGTERMed: every call is answered OK or
UNAVAILABLE (retry elsewhere), never CANCELLED, the callers' own word for giving up; the same
stream through a router in front of three servers while one is SIGTERMed: every request succeeds,
exact."""

from __future__ import annotations

import asyncio
import collections
import signal

import grpc
from support.routing_common import SERVER_ARGS, check, start_servers, stop

from smg_fast.client import AsyncClient
from smg_fast.testing.servers import RouterProcess

STREAMS = 16


async def _stream(target: str, imgs: list[bytes], refs: list, victim, *, tries: int = 0,
                  after: int = 40) -> collections.Counter:
    """STREAMS callers sending one image each, back to back, until the victim has exited.

    The victim is SIGTERMed once ``after`` requests were answered. With ``tries``, a caller answered
    UNAVAILABLE tries again 1 ms later, at most that many times in all, then leaves (as a client
    whose retry policy gives up on a replica). Returns the answers by code name."""
    codes: collections.Counter = collections.Counter()
    sent = asyncio.Event()

    async with AsyncClient(target) as c:
        async def caller(k: int) -> None:
            i, refused = k, 0
            while victim.proc.poll() is None:
                pick = i % len(imgs)
                try:
                    out = await c.preprocess([imgs[pick]], timeout=30)
                except grpc.aio.AioRpcError as exc:
                    codes[exc.code().name] += 1
                    refused += exc.code() == grpc.StatusCode.UNAVAILABLE
                    if tries and refused >= tries:
                        return
                    await asyncio.sleep(0.001)
                    continue
                check(out, [pick], refs)
                codes["OK"] += 1
                if codes["OK"] >= after:
                    sent.set()
                i += STREAMS

        async def term() -> None:
            await sent.wait()
            victim.proc.send_signal(signal.SIGTERM)

        callers = [asyncio.ensure_future(caller(k)) for k in range(STREAMS)]
        killer = asyncio.ensure_future(term())
        try:
            await asyncio.gather(*callers)
        finally:
            killer.cancel()
    return codes


def test_drain_answers_unavailable_never_cancelled(images):
    """Callers straight at a server: each leaves after 20 UNAVAILABLE, none sees CANCELLED."""
    imgs, refs = images(12)
    servers = start_servers(1, SERVER_ARGS)
    try:
        codes = asyncio.run(_stream(servers[0].target, imgs, refs, servers[0],
                                    tries=20))
        assert servers[0].proc.wait(30) == 0
    finally:
        stop(servers)
    assert set(codes) <= {"OK", "UNAVAILABLE"}, codes
    assert codes["UNAVAILABLE"] >= STREAMS and codes["OK"] >= 40, codes


def test_steady_stream_through_router_while_a_member_drains(images):
    """Through a router, a member SIGTERMed mid-stream: zero failures at the caller."""
    imgs, refs = images(12)
    servers = start_servers(3, SERVER_ARGS)
    router = None
    try:
        router = RouterProcess([s.target for s in servers], [])
        router.wait()
        codes = asyncio.run(_stream(router.target, imgs, refs, servers[1], after=100))
        assert servers[1].proc.wait(30) == 0
    finally:
        stop([*servers, router])
    assert set(codes) == {"OK"}, codes
