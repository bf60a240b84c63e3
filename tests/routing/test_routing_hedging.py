"""Hedged sub-calls with three real servers, one of them hung (SIGSTOP).

Its sockets stay open and nothing answers.
Keepalive off, so only hedging can save the requests that meet the hung member: each must still
succeed, exact, within its deadline; the hung member's hedges win, it is suspected, probed and
ejected; the budget holds hedges to a few per cent of the sub-calls while all members are well.
A member's latencies go when it leaves; a suspected member's probe must answer SERVING (a real
health service on loopback answering each status)."""

from __future__ import annotations

import asyncio
import signal

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from support.routing_common import check

from smg_fast.routing import AsyncRoutedClient
from smg_fast.routing.health import Ejection
from smg_fast.routing.hedging import BURST, Hedging
from smg_fast.routing.member import Member


async def _load(fleet, imgs, refs, requests: int, streams: int = 4) -> None:
    """requests one-image requests from streams callers, each checked exact."""
    queue = list(range(requests))

    async def caller() -> None:
        while queue:
            k = queue.pop() % len(imgs)
            out = await fleet.preprocess([imgs[k]], timeout=20)
            check(out, [k], refs)

    await asyncio.gather(*(caller() for _ in range(streams)))


def test_a_hung_member_is_hedged_around(fresh_fleet, images):
    imgs, refs = images(24)
    targets = [s.target for s in fresh_fleet]
    hung = fresh_fleet[2]

    async def main():
        async with AsyncRoutedClient(targets, keepalive_s=0, floor=1, affinity_keys=0) as fleet:
            await _load(fleet, imgs, refs, 240)  # every member's latencies known
            calm = fleet.stats()
            sub_calls = sum(sum(m["items"].values()) for m in calm["members"].values())
            assert calm["hedges"]["sent"] <= BURST + 0.05 * sub_calls, calm["hedges"]
            hung.proc.send_signal(signal.SIGSTOP)
            try:
                await _load(fleet, imgs, refs, 120)
                while fleet.membership.members[hung.target].suspected:  # its probe's verdict
                    await asyncio.sleep(0.05)
            finally:
                hung.proc.send_signal(signal.SIGCONT)
            return calm, fleet.stats()

    calm, stats = asyncio.run(main())
    assert stats["hedges"]["won"] >= 1 and stats["hedges"]["suspected"] >= 1, stats["hedges"]
    assert stats["ejections"] >= 1
    assert stats["members"][hung.target]["items"].get("cancelled", 0) >= 1


def test_hedging_settings_are_checked():
    for bad in ({"percentile": 40}, {"percentile": 100}, {"ratio": -0.1}, {"ratio": 2}):
        try:
            Hedging(None, **bad)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(bad)


def test_a_removed_members_latencies_go(fleet, images):
    """Members leave and come back: what hedging keeps of each goes with it, late answers too."""
    imgs, refs = images(12)
    targets = [s.target for s in fleet]

    async def main() -> None:
        async with AsyncRoutedClient(targets, floor=1, affinity_keys=0) as client:
            for _ in range(3):
                check(await client.preprocess(imgs), list(range(12)), refs)
                gone = client.membership.members[min(client.hedging.tracked())]
                client.hedging.settled(gone, False)  # (a streak kept for it too)
                await client.remove(gone.target)
                assert gone.target not in client.hedging.tracked()
                client.hedging.record(gone, "qwen2_vl", 1, 0.01)  # a sub-call that ended late
                client.hedging.settled(gone, True)
                assert gone.target not in client.hedging.tracked()
                assert await client.add(gone.target)
            assert client.hedging.tracked() <= set(targets)

    asyncio.run(main())


@pytest.mark.parametrize("status", ["SERVING", "NOT_SERVING", "UNKNOWN"])
def test_a_suspected_members_probe_must_answer_serving(status):
    """Only SERVING clears a suspicion; NOT_SERVING and UNKNOWN eject as silence does."""
    async def main() -> tuple[Member, Ejection]:
        server = grpc.aio.server()
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        await servicer.set("", health_pb2.HealthCheckResponse.ServingStatus.Value(status))
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            m = Member(f"127.0.0.1:{port}", channel, None,
                       health=health_pb2_grpc.HealthStub(channel))
            ejection = Ejection()
            Hedging(ejection).suspect(m)
            while m.suspected:  # (its probe is bounded by hedging.PROBE_S)
                await asyncio.sleep(0.01)
            return m, ejection
        finally:
            await channel.close()
            await server.stop(None)

    m, ejection = asyncio.run(main())
    assert m.ejections == ejection.ejected == (status != "SERVING")
