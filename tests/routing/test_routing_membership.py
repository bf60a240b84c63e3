"""The fleet's config fingerprints follow the members admitted now.

Against in-process gRPC members on loopback (GetModelInfo, health, and a Preprocess that answers
empty items). The members given at start are admitted by agreement and list order, whichever answers
first; a member refused for a config unlike the fleet's is admitted once the last member with the
old config leaves (removed or stopped: a rolling upgrade), or once it answers with the fleet's
config (restarted with a fixed one); the default model is the first listed member's, for Preprocess
and GetModelInfo alike, which lists every model the fleet routes; requests that arrive while the
members join wait for the join."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast.routing import membership
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.routed_error import RoutedError

MODEL = "qwen2_vl"


class _Info(pb_grpc.PreprocessorServicer):
    """A fake member: ``models`` under one fingerprint, GetModelInfo after ``delay`` seconds.

    The first of ``models`` is its default; its Preprocess answers one empty item per item and
    records the models it was asked for."""

    def __init__(self, fingerprint: str, models: tuple[str, ...] = (MODEL,),
                 delay: float = 0.0, version: str = "") -> None:
        self.fingerprint, self.models, self.delay = fingerprint, models, delay
        self.version = version
        self.asked: list[str] = []

    async def GetModelInfo(self, request, context):  # noqa: N802 (the gRPC method's name)
        await asyncio.sleep(self.delay)
        return pb.GetModelInfoResponse(default_model=self.models[0], version=self.version,
                                       models=[pb.ModelInfo(name=name,
                                                            config_fingerprint=self.fingerprint)
                                               for name in self.models])

    async def Preprocess(self, request, context):  # noqa: N802
        self.asked.append(request.model)
        return pb.PreprocessResponse(items=[pb.ProcessedItem() for _ in request.items])


async def _serving(fl: Fleet, target: str, within: float = 5.0) -> bool:
    """Whether target becomes placeable within the time (settled() stops at 'refused')."""
    end = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < end:
        if fl.stats()["members"][target]["usable"]:
            return True
        await asyncio.sleep(0.02)
    return False


async def _member(fingerprint: str, **kw):
    """(server, target, servicer).

    A member that serves MODEL (or kw's models) with this fingerprint."""
    server = grpc.aio.server()
    info = _Info(fingerprint, **kw)
    pb_grpc.add_PreprocessorServicer_to_server(info, server)
    health = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}", info


@pytest.mark.parametrize("how", ["removed", "stopped"])
def test_rolling_upgrade_admits_the_new_config_when_the_old_is_gone(how):
    """The fleet's config is its admitted members'.

    Once the old config's last member is gone, the refused members of the new one ask again and are
    admitted (the upgraded fleet serves)."""
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


async def _passthrough(m, resp):
    return list(resp.items)


@pytest.mark.parametrize("configs, delays, want", [
    (("v1", "v2"), (0.3, 0.0), "v1"),  # a tie: the first listed, even when it answers last
    (("v1", "v2"), (0.0, 0.3), "v1"),
    (("v2", "v1", "v1"), (0.0, 0.3, 0.3), "v1"),  # most agree: not the first listed or fastest
])
def test_founders_are_admitted_by_agreement_not_by_who_answers_first(configs, delays, want):
    """The founders' config is the one most of them agree with, not the first to answer's.

    So two routers in front of the same workers serve the same config."""
    async def main():
        made = [await _member(fp, delay=d) for fp, d in zip(configs, delays, strict=True)]
        fl = Fleet([t for _, t, _ in made], keepalive_s=0, join_timeout=10)
        try:
            await fl._ready()
            assert fl.membership.fingerprints == {MODEL: want}
            states = {t: s["state"] for t, s in fl.stats()["members"].items()}
            assert states == {t: "serving" if fp == want else "refused"
                              for (_, t, _), fp in zip(made, configs, strict=True)}
            assert fl.stats()["refused"] == sum(fp != want for fp in configs)
        finally:
            await fl.close()
            await asyncio.gather(*(srv.stop(0) for srv, _, _ in made))

    asyncio.run(main())


def test_default_model_is_the_first_listed_members_for_preprocess_and_model_info():
    """The default model is the first listed member's, and GetModelInfo lists every model.

    A serves qwen2_vl (its default) and kimi_k25, B kimi_k25 only, B answers first: the default
    is A's (not the first admitted member's, B's kimi_k25), and GetModelInfo lists both models
    (not only those every member serves), as Preprocess routes both."""
    async def main():
        a, ta, ia = await _member("fp", models=(MODEL, "kimi_k25"), delay=0.3)
        b, tb, ib = await _member("fp", models=("kimi_k25",))
        fl = Fleet([ta, tb], keepalive_s=0, join_timeout=10)
        try:
            await fl._ready()
            info = fl.membership.info("v", 2**20)
            assert sorted(x.name for x in info.models) == ["kimi_k25", MODEL]
            assert info.default_model == fl.membership.default_model == MODEL
            req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
            await fl.route(req, _passthrough, timeout=10)
            assert (ia.asked, ib.asked) == ([MODEL], [])
            await a.stop(0)  # its default stays the fleet's: never another model's output
            while fl.stats()["members"][ta]["state"] != "down":
                await asyncio.sleep(0.02)
            assert fl.membership.default_model == MODEL
            with pytest.raises(RoutedError) as err:
                await fl.route(req, _passthrough, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE and ib.asked == []
            assert fl.membership.info("v", 2**20).default_model == MODEL
        finally:
            await fl.close()
            await asyncio.gather(a.stop(0), b.stop(0))

    asyncio.run(main())


def test_requests_arriving_while_members_join_wait_for_the_join():
    """Every request that arrives while the members join waits for the join.

    Not only the first: the others would find no member serving yet."""
    async def main():
        server, target, info = await _member("v1", delay=0.2)
        fl = Fleet([target], keepalive_s=0, join_timeout=10)  # not entered: requests at once
        try:
            req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
            outs = await asyncio.gather(*(fl.route(req, _passthrough, 10) for _ in range(3)))
            assert [len(items) for items, _ in outs] == [1, 1, 1] and len(info.asked) == 3
        finally:
            await fl.close()
            await server.stop(0)

    asyncio.run(main())


def test_version_skew_is_logged(caplog):
    async def main():
        made = [await _member("v1", version=v) for v in ("0.1.0", "0.2.0")]
        fl = Fleet([t for _, t, _ in made], keepalive_s=0, join_timeout=10)
        try:
            with caplog.at_level(logging.WARNING, logger="smg_fast.routing"):
                await fl._ready()
            assert all(s["state"] == "serving" for s in fl.stats()["members"].values())
        finally:
            await fl.close()
            await asyncio.gather(*(srv.stop(0) for srv, _, _ in made))

    asyncio.run(main())
    assert "runs smg-fast 0.2.0, the fleet's other members 0.1.0" in caplog.text
