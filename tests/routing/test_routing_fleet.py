"""RoutedClient / AsyncRoutedClient over three real server processes on loopback.

Exact and in order against the in-process processor, errors naming the caller's item, nothing
failed, lost, duplicated or reordered when a worker is SIGKILLed (items in flight on it: retried) or
drained (an item in flight on it) mid-run, a member whose config differs refused, and release() of
unused shm segments."""

from __future__ import annotations

import asyncio
import os
import random
import signal

import grpc
import pytest
from support.routing_common import SERVER_ARGS, check, preferring, stop

from smg_fast import load_processor
from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast.client import _media_item, build_request
from smg_fast.compact import CompactTensor
from smg_fast.routing import AsyncRoutedClient, RoutedClient, RoutedError
from smg_fast.routing.client import release
from smg_fast.routing.placement import item_key
from smg_fast.testing.servers import ServerProcess
from smg_fast.transport.tensors import shm_namespace


def test_multi_image_exact_and_in_order(fleet, images):
    imgs, refs = images(16)
    targets = [s.target for s in fleet]
    # A repeat waits for a member holding its key rather than spilling to one that does not.
    with RoutedClient(targets, timeout=30, floor=1, affinity_wait=5) as rc:
        picks = [3, 0, 15, 7, 7, 1, 12, 9]  # a duplicate inside the request too
        holders: dict[int, set[str]] = {k: set() for k in picks}
        for transport in ("shm", "inline"):
            out = rc.preprocess([imgs[k] for k in picks], transport=transport)
            check(out, picks, refs)
            assert all(it.worker in targets for it in out.items)
            assert {it.transport for it in out.items} == {transport}
            for k, it in zip(picks, out.items, strict=True):
                holders[k].add(it.worker)
        assert len(set().union(*holders.values())) > 1  # the images really were spread
        # Same keys: each goes back to a member that already holds it (which one of them
        # depends on the load bound at dispatch time), so every item is a cache hit.
        again = rc.preprocess([imgs[k] for k in picks])
        check(again, picks, refs)
        assert all(it.worker in holders[k] for k, it in zip(picks, again.items, strict=True))
        assert all(it.cache_hit for it in again.items)
        assert rc.stats()["items"] == 24
        # the compact exact format passes through the fleet: its codes and table expand to refs
        compact = rc.preprocess([imgs[k] for k in picks[:3]], encoding="uint8+lut")
        assert all(isinstance(it.pixel_values, CompactTensor) for it in compact.items)
        check(rc.preprocess([imgs[k] for k in picks[:3]], encoding="uint8+lut", expand=True),
              picks[:3], refs)


def test_invalid_item_names_the_callers_index(fleet, images):
    imgs, _ = images(16)
    with RoutedClient([s.target for s in fleet], timeout=30) as rc:
        with pytest.raises(RoutedError) as err:
            rc.preprocess([imgs[0], imgs[1], imgs[2], imgs[3], b"not an image", imgs[4]])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.index == 4
    assert "item 4" in err.value.details(), err.value.details()


async def _run(targets, imgs, refs, *, requests: int, disrupt, seed: int, **kw) -> dict:
    """Concurrency 8 over `requests` requests of 1-5 images.

    ``await disrupt(client)`` after the 6th completes (the other 7 go on meanwhile). Every request
    must succeed with its items exact and in order."""
    rnd = random.Random(seed)
    plans = [[rnd.randrange(len(imgs)) for _ in range(rnd.randint(1, 5))]
             for _ in range(requests)]
    queue = list(range(requests))
    done = 0
    async with AsyncRoutedClient(targets, timeout=30, **kw) as fleet:
        async def worker() -> None:
            nonlocal done
            while queue:
                picks = plans[queue.pop()]
                out = await fleet.preprocess([imgs[k] for k in picks])
                check(out, picks, refs)
                done += 1
                if done == 6:
                    await disrupt(fleet)

        await asyncio.gather(*(worker() for _ in range(8)))
        return fleet.stats()


def _fresh(target: str, targets: list[str], count: int, size=(64, 48), start: int = 1000):
    """count new images whose first choice is target, with their in-process results.

    None of them is one of the run's images, so no member holds them."""
    proc = load_processor("qwen2_vl")
    ims = preferring(target, targets, count, start=start, size=size)
    return ims, [proc(im)["pixel_values"] for im in ims]


async def _placed_on(rc, target: str, ims: list[bytes]) -> int:
    """Waits until every image of ims was placed on target (the fleet remembers it there).

    Then target's items in flight."""
    m = rc.membership.members[target]
    keys = [item_key(_media_item(im), "qwen2_vl", "float32", None, None) for im in ims]
    for _ in range(10000):
        if all(rc.affinity.holders(k, {target: m.joins}) for k in keys):
            return m.in_flight
        await asyncio.sleep(0.001)
    raise AssertionError(f"not placed on {target}")


def test_sigkill_one_worker_mid_run(fresh_fleet, images):
    """A worker SIGKILLed mid-run with items in flight fails no request.

    Mid-run, the victim serves a new image whose first choice it is (so it was in use, whatever the
    run's own images prefer), then is stopped (it answers nothing from then on), two more such
    images are placed on it (floor 64: nothing spills), and it is SIGKILLed with them in flight:
    they are retried elsewhere and the request succeeds, as do all others."""
    imgs, refs = images(16)
    victim = fresh_fleet[0]
    targets = [s.target for s in fresh_fleet]
    probe, probe_refs = _fresh(victim.target, targets, 2)
    served, served_refs = _fresh(victim.target, targets, 1, start=2000)
    seen = {}

    async def disrupt(rc) -> None:
        out = await rc.preprocess(served)
        check(out, [0], served_refs)
        assert out.items[0].worker == victim.target
        victim.proc.send_signal(signal.SIGSTOP)
        task = asyncio.ensure_future(rc.preprocess(probe))
        seen["in_flight"] = await _placed_on(rc, victim.target, probe)
        victim.kill()
        out = await task
        check(out, [0, 1], probe_refs)
        seen["workers"] = {it.worker for it in out.items}

    stats = asyncio.run(_run(targets, imgs, refs, requests=60, disrupt=disrupt, seed=1,
                             floor=64))
    assert victim.proc.returncode == -signal.SIGKILL
    assert seen["in_flight"] >= 2 and victim.target not in seen["workers"]
    assert sum(stats["retries"].values()) >= 2, stats  # the probe's items at least
    assert stats["members"][victim.target]["state"] == "down"
    assert stats["requests"] == 62
    assert stats["members"][victim.target]["items"].get("ok", 0) > 0  # it was in use


def test_sigterm_drain_one_worker_mid_run(fresh_fleet, images):
    """A worker drained by SIGTERM mid-run fails no request, not even one placed on it.

    Mid-run, a slow new image whose first choice is the victim is placed on it, then the victim is
    SIGTERMed (drain): that request and all others succeed, exact."""
    imgs, refs = images(16)
    victim = fresh_fleet[1]
    targets = [s.target for s in fresh_fleet]
    slow, slow_refs = _fresh(victim.target, targets, 1, size=(1000, 750))
    seen = {}

    async def disrupt(rc) -> None:
        task = asyncio.ensure_future(rc.preprocess(slow))
        seen["in_flight"] = await _placed_on(rc, victim.target, slow)
        victim.proc.send_signal(signal.SIGTERM)
        check(await task, [0], slow_refs)

    stats = asyncio.run(_run(targets, imgs, refs, requests=60, disrupt=disrupt, seed=2,
                             floor=64))
    assert victim.proc.wait(30) == 0
    assert seen["in_flight"] >= 1
    assert stats["requests"] == 61
    assert stats["members"][victim.target]["items"].get("ok", 0) > 0  # it was in use


@pytest.mark.parametrize("unlike", [
    ["--model", "qwen2_vl=qwen2_5_vl"],  # same name, another config fingerprint
    # the same outputs, but another input limit: an image would pass or fail by where it lands
    ["--max-image-pixels", "300000"],
])
def test_member_with_other_fingerprint_is_refused(fleet, images, unlike):
    imgs, refs = images(16)
    same = fleet[:2]  # members like each other (the shared fleet's: they keep serving)
    other = ServerProcess([*SERVER_ARGS, *unlike])
    try:
        other.wait()
        with RoutedClient([s.target for s in same], timeout=30) as rc:
            assert rc.add(other.target) is False
            stats = rc.stats()
            assert stats["refused"] == 1
            assert stats["members"][other.target]["state"] == "refused"
            picks = list(range(10))
            out = rc.preprocess([imgs[k] for k in picks])
            check(out, picks, refs)
            assert other.target not in {it.worker for it in out.items}
    finally:
        stop([other])


def test_release_unlinks_unused_shm_segments(fleet, images):
    imgs, _ = images(16)
    channel = grpc.insecure_channel(fleet[0].target)
    try:
        req = build_request(imgs[:3], transport="shm", namespace=shm_namespace())
        resp = pb_grpc.PreprocessorStub(channel).Preprocess(req, timeout=30)
    finally:
        channel.close()
    paths = [os.path.join("/dev/shm", it.pixel_values.shm.name) for it in resp.items]
    assert all(os.path.exists(p) for p in paths)
    assert release(resp) == 3
    assert not any(os.path.exists(p) for p in paths)


def test_caller_deadline_is_propagated_not_retried(fleet, images):
    imgs, _ = images(16)
    with RoutedClient([s.target for s in fleet]) as rc:
        # The members are stopped (SIGSTOP) while the caller's deadlines run, so no answer can
        # arrive first however the machine is loaded.
        for s in fleet:
            os.kill(s.pid, signal.SIGSTOP)
        try:
            with pytest.raises(RoutedError) as err:
                rc.preprocess(imgs[:8], timeout=0.2)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert rc.stats()["retries"] == {}  # the caller's time was up: nothing sent again
            for _ in range(3):  # more of the caller's own expired deadlines...
                with pytest.raises(RoutedError):
                    rc.preprocess(imgs[:8], timeout=0.2)
        finally:
            for s in fleet:
                os.kill(s.pid, signal.SIGCONT)
        assert rc.stats()["ejections"] == 0  # ...are not the members' failures
        out = rc.preprocess(imgs[:2], timeout=30)  # and every member still takes work
        assert len(out.items) == 2


def test_concurrent_requests_respect_the_load_bound(fleet, images):
    """Requests placed in the same moment see each other's items.

    12 concurrent requests for one hot image spread over the fleet instead of all landing on its
    first choice; each other member is given it to compute once (a spill), then as a member that has
    it (affinity). (affinity_wait=0: the image never waits for a member, so the spread does not
    depend on how fast the first answers come.)"""
    imgs, refs = images(16)

    async def main():
        async with AsyncRoutedClient([s.target for s in fleet], timeout=60, floor=1,
                                     affinity_wait=0) as rc:
            outs = await asyncio.gather(*[rc.preprocess([imgs[0]]) for _ in range(12)])
            return outs, rc.stats()

    outs, stats = asyncio.run(main())
    for out in outs:
        check(out, [0], refs)
    per_worker: dict[str, int] = {}
    for out in outs:
        per_worker[out.items[0].worker] = per_worker.get(out.items[0].worker, 0) + 1
    # bound: max(floor, ceil(1.25 * (in-flight + 1) / 3)) <= 5 for 12 items placed together
    assert max(per_worker.values()) <= 5, per_worker
    assert stats["spills"] + stats["affinity"] >= 7, stats  # past the first choice
    assert stats["spills"] <= 2, stats  # a new copy on each other member at most
