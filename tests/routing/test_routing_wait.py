"""An image whose remembered members are all at the load bound waits in the fleet.

Against in-process fake members (routing_fakes.py): it waits for the member that has it, sent
nowhere, and spills once the wait is over; and in a burst only as many wait for a member as it has
items in flight, the rest go elsewhere at once."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from support.routing_fakes import MODEL, image_preferring, member, passthrough, response

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.placement import item_key, order
from smg_fast.routing.routed_request import RoutedRequest


@pytest.mark.parametrize("wait_s", [30.0, 0.05])
def test_image_waits_for_the_member_that_has_it(wait_s):
    """An image whose member is at the bound waits for it, then goes back there or spills.

    The image is in flight on a:1, its first choice, which is then at the bound (floor 1, 1 item of
    1): the same image again waits in the fleet, sent nowhere, while a caller that gives up
    meanwhile leaves nothing behind; when a:1's call ends it goes back to a:1 (a cache hit there, no
    spill), or, once affinity_wait is over, to its next member (one spill)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1, affinity_wait=wait_s)
        release = asyncio.Event()

        async def slow(sub):
            await release.wait()
            return response([""] * len(sub.items))

        async def quick(sub):
            return response([""] * len(sub.items))

        targets = ["a:1", "b:2", "c:3"]
        members = {t: member(fl, t, slow if t == "a:1" else quick) for t in targets}
        image = image_preferring("a:1", targets)
        req = pb.PreprocessRequest(items=[image])
        first = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        await asyncio.sleep(0.01)
        gone.cancel()  # its caller leaves while it waits
        with pytest.raises(asyncio.CancelledError):
            await gone
        second = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        calls = {t: m.stub for t, m in members.items()}
        await asyncio.sleep(0)  # its first placement: it waits, sent nowhere
        assert not second.done() and {t: c.calls for t, c in calls.items()} == {
            "a:1": 1, "b:2": 0, "c:3": 0}
        if wait_s > 1:
            await asyncio.sleep(0.1)
            assert {t: c.calls for t, c in calls.items()} == {"a:1": 1, "b:2": 0, "c:3": 0}
            assert members["a:1"].in_flight == 1 and fl.stats()["waited"] == 2
            release.set()
            await first
            await second
            assert {t: c.calls for t, c in calls.items()} == {"a:1": 2, "b:2": 0, "c:3": 0}
            assert fl.stats()["spills"] == 0
        else:
            await second  # its wait over, it spilled
            after = order(item_key(image, MODEL, "", None, None), targets)[1]
            assert calls["a:1"].calls == 1 and calls[after].calls == 1
            assert fl.stats()["spills"] == 1 and fl.stats()["waited"] == 2
            release.set()
            await first
        assert all(m.in_flight == 0 for m in members.values())

    asyncio.run(main())


def test_a_burst_of_one_image_waits_only_for_slots_that_free_soon():
    """a:1's first call holds the image (floor 1: a:1 at the bound) until the end.

    Five more requests for it at once: only as many wait for a:1 as it has items in flight (one);
    the next spills once (to its second member, which then has it too) and the rest go to the
    members that have it or wait for their slots: all five are answered while a:1's first call still
    runs (not every one waiting for a:1, sent nowhere, for affinity_wait)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1, affinity_wait=30.0)
        release = asyncio.Event()
        held = []

        async def answer(sub):
            if not held:  # the first call only
                held.append(sub)
                await release.wait()
            return response([""] * len(sub.items))

        targets = ["a:1", "b:2", "c:3"]
        members = {t: member(fl, t, answer) for t in targets}
        req = pb.PreprocessRequest(items=[image_preferring("a:1", targets)])
        first = asyncio.ensure_future(fl.route(req, passthrough, timeout=60))
        await asyncio.sleep(0)
        assert members["a:1"].in_flight == 1
        burst = [asyncio.ensure_future(fl.route(req, passthrough, timeout=60))
                 for _ in range(5)]
        await asyncio.sleep(0)  # their first placements
        assert fl._waiting == {"a:1": 1} and fl.stats()["spills"] == 1
        done, _ = await asyncio.wait(burst, timeout=20)
        assert len(done) == 5 and not first.done()
        assert not fl._waiting and fl.stats()["spills"] == 1
        release.set()
        await first
        assert all(m.in_flight == 0 for m in members.values())

    asyncio.run(main())


def test_a_short_deadline_is_not_spent_waiting():
    """The caller's timeout (0.4 s) is shorter than affinity_wait (30 s).

    The image waits for the busy member that has it at most half of it, then goes to its next member
    and succeeds (it does not wait the whole deadline, to be sent with 0 s left and fail
    DEADLINE_EXCEEDED, charged to the idle member, which affinity would then name as its holder)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1, affinity_wait=30.0)
        release = asyncio.Event()

        async def slow(sub):
            await release.wait()
            return response([""] * len(sub.items))

        async def quick(sub):
            return response([""] * len(sub.items))

        targets = ["a:1", "b:2", "c:3"]
        members = {t: member(fl, t, slow if t == "a:1" else quick) for t in targets}
        image = image_preferring("a:1", targets)
        req = pb.PreprocessRequest(items=[image])
        first = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        items, _ = await fl.route(req, passthrough, timeout=0.4)
        assert len(items) == 1 and loop.time() - t0 < 0.35
        after = order(item_key(image, MODEL, "", None, None), targets)[1]
        assert members[after].stub.calls == 1 and fl.stats()["spills"] == 1
        assert all(m.items.get("deadline_exceeded", 0) == 0 for m in members.values())
        release.set()
        await first
        assert all(m.in_flight == 0 for m in members.values())

    asyncio.run(main())


def test_no_sub_call_is_sent_with_no_time_left():
    """A sub-call whose caller's deadline passed before it started is not sent.

    It fails in the fleet with DEADLINE_EXCEEDED, not retried, the member neither called nor
    charged, its in-flight count given back and its half-open probe freed."""
    async def main():
        fl = Fleet([], keepalive_s=0)

        async def quick(sub):
            return response([""] * len(sub.items))

        m = member(fl, "a:1", quick)
        m.in_flight, m.probing, m.ejections = 1, True, 1  # as _place leaves a probe
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
        loop = asyncio.get_running_loop()
        r = RoutedRequest(req, MODEL, [b"x"], finish=passthrough,
                          deadline=loop.time() - 0.001)
        status, (code, _, retry) = await fl.calls.call(r, m, m.epoch, True, [0])
        assert status == "error" and code == grpc.StatusCode.DEADLINE_EXCEEDED and not retry
        assert m.stub.calls == 0 and m.in_flight == 0 and not m.probing and not m.items
        assert m.failures == 0 and m.ejections == 1

    asyncio.run(main())
