"""The fleet's config fingerprints follow the members admitted now, against in-process gRPC
members (GetModelInfo and health only): a member refused for a config unlike the fleet's is
admitted once the last member with the old config leaves (removed or stopped: a rolling
upgrade), or once it answers with the fleet's config (restarted with a fixed one)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast.routing import membership
from smg_fast.routing.dispatch import Fleet

MODEL = "qwen2_vl"


class _Info(pb_grpc.PreprocessorServicer):
    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint

    async def GetModelInfo(self, request, context):  # noqa: N802 (the gRPC method's name)
        return pb.GetModelInfoResponse(default_model=MODEL, models=[
            pb.ModelInfo(name=MODEL, config_fingerprint=self.fingerprint)])


async def _serving(fl: Fleet, target: str, within: float = 5.0) -> bool:
    """Whether target becomes placeable within the time (settled() stops at 'refused')."""
    end = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < end:
        if fl.stats()["members"][target]["usable"]:
            return True
        await asyncio.sleep(0.02)
    return False


async def _member(fingerprint: str):
    """(server, target, servicer): a member that serves MODEL with this fingerprint."""
    server = grpc.aio.server()
    info = _Info(fingerprint)
    pb_grpc.add_PreprocessorServicer_to_server(info, server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}", info


@pytest.mark.parametrize("how", ["removed", "stopped"])
def test_rolling_upgrade_admits_the_new_config_when_the_old_is_gone(how):
    """Before: the first member's fingerprint was the fleet's forever, and a refused member
    never asked again, so the upgraded fleet served nothing."""
    async def main():
        old, old_target, _ = await _member("v1")
        new, new_target, _ = await _member("v2")
        fl = Fleet([old_target], keepalive_s=0, join_timeout=10)
        try:
            await fl._ready()
            assert await fl.add(new_target) is False  # v1 is the fleet's: v2 refused
            assert fl.membership.fingerprints == {MODEL: "v1"}
            if how == "removed":
                await fl.remove(old_target)
            else:
                await old.stop(0)  # its Watch breaks: down, no longer admitted
            assert await _serving(fl, new_target, 3.0)  # asked again at once (not after 5 s)
            assert fl.membership.fingerprints == {MODEL: "v2"}
            assert fl.membership.default_model == MODEL
            stats = fl.stats()
            assert stats["refused"] == 1 and stats["members"][new_target]["usable"]
        finally:
            await fl.close()
            await asyncio.gather(old.stop(0), new.stop(0))

    asyncio.run(main())


def test_refused_member_is_admitted_once_it_matches(monkeypatch):
    monkeypatch.setattr(membership, "REFUSED_RETRY_S", 0.2)

    async def main():
        first, first_target, _ = await _member("v1")
        other, other_target, info = await _member("v2")
        fl = Fleet([first_target], keepalive_s=0, join_timeout=10)
        try:
            await fl._ready()
            assert await fl.add(other_target) is False
            await asyncio.sleep(0.5)  # asked again, still unlike: refused, counted once
            m = fl.membership.members[other_target]
            assert m.state == "refused" and fl.stats()["refused"] == 1
            info.fingerprint = "v1"  # (restarted with the fleet's config)
            assert await _serving(fl, other_target)
            assert {t for t, s in fl.stats()["members"].items() if s["usable"]} == {
                first_target, other_target}
        finally:
            await fl.close()
            await asyncio.gather(first.stop(0), other.stop(0))

    asyncio.run(main())
