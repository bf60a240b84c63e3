"""Drains as callers see them: no call ends CANCELLED, none fails through a router.

A steady stream of requests straight at a server that is SIGTERMed: every call is answered OK or
UNAVAILABLE (retry elsewhere), never CANCELLED, the callers' own word for giving up; the same
stream through a router in front of three servers while one is SIGTERMed: every request succeeds,
exact (smg_fast.testing.streams)."""

from __future__ import annotations

import asyncio

from support.routing_common import SERVER_ARGS, check, start_servers, stop

from smg_fast.client import AsyncClient
from smg_fast.testing.servers import RouterProcess
from smg_fast.testing.streams import stream_through_drain


def _stream(target: str, imgs, refs, victim, **kw):
    async def main():
        async with AsyncClient(target) as c:
            codes, _ = await stream_through_drain(
                c, victim.proc, imgs, lambda out, k: check(out, [k], refs), **kw)
            return codes

    return asyncio.run(main())


def test_drain_answers_unavailable_never_cancelled(images):
    """Callers straight at a server: each leaves after 20 UNAVAILABLE, none sees CANCELLED."""
    imgs, refs = images(12)
    servers = start_servers(1, SERVER_ARGS)
    try:
        codes = _stream(servers[0].target, imgs, refs, servers[0], tries=20)
        assert servers[0].proc.wait(30) == 0
    finally:
        stop(servers)
    assert set(codes) <= {"OK", "UNAVAILABLE"}, codes
    assert codes["UNAVAILABLE"] >= 16 and codes["OK"] >= 40, codes


def test_steady_stream_through_router_while_a_member_drains(images):
    """Through a router, a member SIGTERMed mid-stream: zero failures at the caller."""
    imgs, refs = images(12)
    servers = start_servers(3, SERVER_ARGS)
    router = None
    try:
        router = RouterProcess([s.target for s in servers], [])
        router.wait()
        codes = _stream(router.target, imgs, refs, servers[1], after=100)
        assert servers[1].proc.wait(30) == 0
    finally:
        stop([*servers, router])
    assert set(codes) == {"OK"}, codes
