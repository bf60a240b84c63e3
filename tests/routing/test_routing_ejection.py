"""What ejects a member, against in-process fake members (routing_fakes.py).

A sub-call that runs past ``attempt_timeout`` sends its items to their next member but counts toward
ejection only when the member does not answer a health Check either; slow valid work from one tenant
no longer ejects healthy members for everyone."""

from __future__ import annotations

import asyncio

import pytest
from support.routing_fakes import MODEL, Health, member, passthrough, response

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.placement import item_key, order


def images_preferring(target: str, targets: list[str], count: int) -> list[pb.MediaItem]:
    found = [pb.MediaItem(data=b"image %d" % k) for k in range(500)]
    found = [it for it in found
             if order(item_key(it, MODEL, "", None, None), targets)[0] == target]
    assert len(found) >= count
    return found[:count]


@pytest.mark.parametrize("alive", [True, False])
def test_attempt_timeout_ejects_only_with_a_failed_health_check(alive):
    """A timeout alone never ejects: a:1 is ejected only when its health Check fails too.

    a:1 takes longer than attempt_timeout for every call; each request's item goes on to b:2
    and succeeds. With eject_after=1, a member that answers its Check is slow, not failed, and
    stays placeable; one that does not (a hung process) is ejected."""
    async def main():
        fl = Fleet([], keepalive_s=0, attempt_timeout=0.05, eject_after=1)
        done = asyncio.Event()

        async def slow(sub):
            await done.wait()
            return response([""] * len(sub.items))

        async def quick(sub):
            return response([""] * len(sub.items))

        health = Health(alive)
        a = member(fl, "a:1", slow, health=health)
        b = member(fl, "b:2", quick, health=Health())
        for image in images_preferring("a:1", ["a:1", "b:2"], 3):  # (none placed before)
            req = pb.PreprocessRequest(items=[image])
            items, _ = await fl.route(req, passthrough, timeout=30)
            assert len(items) == 1
            await asyncio.sleep(0.01)  # the health Check's verdict
            if not alive:
                break
        assert health.checks >= 1
        assert a.items.get("deadline_exceeded") and b.items.get("ok")
        stats = fl.stats()
        if alive:
            assert a.stub.calls == 3 and stats["ejections"] == 0, stats
            assert stats["members"]["a:1"]["usable"] and a.failures == 0
        else:
            assert stats["ejections"] == 1 and not stats["members"]["a:1"]["usable"], stats
        assert sum(stats["retries"].values()) == a.stub.calls
        done.set()
        await asyncio.sleep(0)

    asyncio.run(main())
