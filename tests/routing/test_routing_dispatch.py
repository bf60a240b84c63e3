"""Fleet.route against in-process fake members.

The fakes (routing_fakes.py) are stubs whose answers the test scripts; no server, no network. A
cancelled half-open probe frees its member, every member busy is a retryable failure with retries
counted only for items placed again, a failed or cancelled request unlinks the shm segments its
finished sub-calls made, items go only to members that serve their model, placement counts nothing
for a request it fails, sub-calls copy only their own images, an empty request is refused as a
server refuses it, unreadable or miscounted answers are counted, and the library checks its
settings. (Waiting for a member that has an image: test_routing_wait.py.)"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import grpc
import pytest
from support.routing_fakes import (
    MODEL,
    error,
    member,
    passthrough,
    response,
    segment,
    two_images,
)

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast._service.wire import MAX_ITEMS
from smg_fast.routing import AsyncRoutedClient, RoutedClient, RoutedError
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.placement import item_key, item_weight
from smg_fast.routing.routed_request import RoutedRequest

_C = grpc.StatusCode

def test_cancelled_probe_frees_the_member():
    """The caller cancels while the half-open probe is in flight.

    The next request probes again (the member is not left probing forever, never placed on again).
    """
    async def main():
        fl = Fleet([], keepalive_s=0)
        hang = asyncio.Event()

        async def handler(sub):
            if not hang.is_set():
                await asyncio.Event().wait()  # the probe: never answers
            return response([""] * len(sub.items))

        m = member(fl, "a:1", handler)
        m.ejections, m.ejected_until = 1, 0.0  # ejected once, its span over: half-open
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
        t = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        await asyncio.sleep(0.05)
        stats = fl.stats()["members"]["a:1"]
        assert m.probing and not m.usable(time.monotonic())
        assert stats["ejected"] and not stats["usable"], stats  # not shown as placeable
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert not m.probing and m.usable(time.monotonic())
        assert fl.stats()["members"]["a:1"]["usable"]
        hang.set()
        items, _ = await fl.route(req, passthrough, timeout=30)  # probed again: it answers
        assert len(items) == 1 and m.ejections == 0 and m.in_flight == 0
        fl.membership._set_state(m, "serving")
        m.ejections, m.probing = 1, True
        fl.membership._set_state(m, "down")  # a probe's member that goes away
        assert not m.probing

    asyncio.run(main())


def test_every_member_busy_is_retryable():
    """Both members answer RESOURCE_EXHAUSTED marked retryable: the request fails retryable.

    The router's trailer says 1, and one retry is counted (the item went to b once), not two
    (none for the item that went nowhere)."""
    async def main():
        fl = Fleet([], keepalive_s=0)

        async def busy(sub):
            raise error(_C.RESOURCE_EXHAUSTED, "server busy: 1 request queued", "1")

        stubs = [member(fl, t, busy).stub for t in ("a:1", "b:2")]
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
        with pytest.raises(RoutedError) as err:
            await fl.route(req, passthrough, timeout=30)
        assert err.value.code() == _C.RESOURCE_EXHAUSTED and err.value.retryable
        assert err.value.index == 0 and "tried on 2 member(s)" in err.value.details()
        assert fl.stats()["retries"] == {"resource_exhausted": 1}
        assert [s.calls for s in stubs] == [1, 1]

    asyncio.run(main())


@pytest.mark.parametrize("how", ["later", "same_moment", "cancelled"])
def test_failed_request_releases_finished_sub_calls(how):
    """One sub-call answers with a shm segment.

    The other fails (later, or in the same loop turn), or the caller cancels: nobody will read the
    segment, so it is unlinked at once, not left in /dev/shm until the worker exits."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)
        name = segment()
        gate = asyncio.get_running_loop().create_future()

        async def good(sub):
            if how == "same_moment":
                await gate
            return response([name])

        async def bad(sub):
            if how == "cancelled":
                await asyncio.Event().wait()
            if how == "same_moment":
                await gate
            else:
                await asyncio.sleep(0.1)
            raise error(_C.INVALID_ARGUMENT, "item 0: not an image")

        member(fl, "a:1", good)
        member(fl, "b:2", bad)
        first, second = two_images(["a:1", "b:2"])
        req = pb.PreprocessRequest(items=[first, second], shm_namespace=fl.namespace)
        t = asyncio.ensure_future(fl.route(req, passthrough, timeout=30))
        try:
            await asyncio.sleep(0.05)
            if how == "same_moment":
                gate.set_result(None)
            if how == "cancelled":
                t.cancel()
            with pytest.raises((RoutedError, asyncio.CancelledError)) as err:
                await t
            if how != "cancelled":
                assert err.value.code() == _C.INVALID_ARGUMENT and err.value.index == 1
            assert not os.path.exists(f"/dev/shm/{name}")
            assert fl.stats()["unread_released"] == 1
            assert fl.stats()["failed"] == 1  # (a caller that left too)
        finally:
            if os.path.exists(f"/dev/shm/{name}"):
                os.unlink(f"/dev/shm/{name}")

    asyncio.run(main())


def test_items_go_only_to_members_serving_their_model():
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)

        async def answer(sub):
            return response([""] * len(sub.items))

        qwen = member(fl, "a:1", answer, models=(MODEL,))
        kimi = member(fl, "b:2", answer, models=("kimi_k25",))
        items = [pb.MediaItem(data=b"image %d" % k) for k in range(12)]
        await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), passthrough, 30)
        assert (qwen.stub.calls, kimi.stub.calls) == (0, 1)
        await fl.route(pb.PreprocessRequest(items=items), passthrough, 30)  # default: qwen
        assert (qwen.stub.calls, kimi.stub.calls) == (1, 1)
        with pytest.raises(RoutedError) as err:  # not placed on either
            await fl.route(pb.PreprocessRequest(items=items, model="nope"), passthrough, 30)
        assert err.value.code() == _C.INVALID_ARGUMENT and err.value.index == 0
        assert "'nope'" in err.value.details() and "item 0" in err.value.details()
        kimi.state = "down"  # a model the fleet knows, its member not serving: transient
        with pytest.raises(RoutedError) as err:
            await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), passthrough,
                           30)
        assert err.value.code() == _C.UNAVAILABLE
        fl.membership._leave(kimi)  # crashed: no longer admitted, its models forgotten
        with pytest.raises(RoutedError) as err:  # still transient: retry, not "unknown model"
            await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), passthrough,
                           30)
        assert err.value.code() == _C.UNAVAILABLE

    asyncio.run(main())


def test_placement_that_fails_counts_nothing():
    """Item 0 spills, item 1 has no member left.

    Nothing is sent, so no spill, no retry and no in-flight count stays behind."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)

        async def answer(sub):
            return response([""] * len(sub.items))

        a, b = member(fl, "a:1", answer), member(fl, "b:2", answer)
        first, _ = two_images(["a:1", "b:2"])
        a.in_flight = 5  # over the bound: item 0 spills to b
        r = RoutedRequest(pb.PreprocessRequest(items=[first, first]), MODEL,
                          [item_key(first, MODEL, "", None, None)] * 2)
        r.tried[1] = {"a:1", "b:2"}
        r.last[1] = (_C.RESOURCE_EXHAUSTED, "busy")
        with pytest.raises(RoutedError) as err:
            fl._place(r)
        assert err.value.index == 1 and err.value.retryable
        assert fl.counts["spills"] == 0 and fl.retries == {}
        assert (a.in_flight, b.in_flight) == (5, 0)

    asyncio.run(main())


def test_sub_calls_copy_only_their_own_images():
    """A 32 MiB request spread over 4 members holds about one more copy of its images in flight.

    No sub-call copies the whole request to drop the others' items (that would be 5 copies).
    Peak memory of a fresh process, not time."""
    import smg_fast

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(smg_fast.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    script = Path(__file__).parents[1] / "support" / "routing_copy_script.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    size_kib, grown_kib, calls = map(int, out.stdout.split())
    assert calls >= 3  # spread (rendezvous over 4 members)
    assert grown_kib < 2 * size_kib, (size_kib, grown_kib)


def test_empty_request_is_refused_as_a_server_refuses_it():
    async def main():
        async with AsyncRoutedClient(["127.0.0.1:1"], keepalive_s=0, join_timeout=2) as rc:
            with pytest.raises(RoutedError) as err:
                await rc.preprocess([])
        return err.value

    err = asyncio.run(main())
    assert err.code() == _C.INVALID_ARGUMENT and err.details() == "request has no items"


def test_too_many_items_are_refused_before_any_sub_call():
    """More than a server's MAX_ITEMS in one request: INVALID_ARGUMENT from the fleet itself.

    No sub-call is made (split over members each under the limit, a 2100-item request would
    fail with a sub-request's count after its siblings did their work); MAX_ITEMS passes."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=4096)
        calls = []

        async def handler(sub):
            calls.append(len(sub.items))
            return response([""] * len(sub.items))

        member(fl, "a:1", handler)
        member(fl, "b:1", handler)
        big = pb.PreprocessRequest(items=[pb.MediaItem(data=b"%d" % k)
                                          for k in range(MAX_ITEMS + 1)])
        with pytest.raises(RoutedError) as err:
            await fl.route(big, passthrough, timeout=30)
        assert err.value.code() == _C.INVALID_ARGUMENT and err.value.index is None
        assert err.value.details() == f"{MAX_ITEMS + 1} items, at most {MAX_ITEMS} per request"
        assert calls == [] and fl.counts["requests"] == 0
        del big.items[-1]
        items, _ = await fl.route(big, passthrough, timeout=30)
        assert len(items) == MAX_ITEMS and sum(calls) == MAX_ITEMS

    asyncio.run(main())


def test_unreadable_or_miscounted_answers_fail_the_request_and_are_counted():
    """finish raises (an answer that cannot be read), or a member answers the wrong number of items.

    The request fails, counted as failed, the items' outcome recorded on the member."""
    async def main():
        fl = Fleet([], keepalive_s=0)

        async def one_short(sub):
            return response([""] * (len(sub.items) - 1))

        async def answer(sub):
            return response([""] * len(sub.items))

        async def unreadable(m, resp):
            raise ValueError("segment gone")

        items = [pb.MediaItem(data=b"a"), pb.MediaItem(data=b"b")]
        m = member(fl, "a:1", answer)
        with pytest.raises(ValueError):
            await fl.route(pb.PreprocessRequest(items=items), unreadable, 30)
        m.stub.handler = one_short
        with pytest.raises(RoutedError) as err:
            await fl.route(pb.PreprocessRequest(items=items), passthrough, 30)
        assert err.value.code() == _C.INTERNAL and "answered 1 items for 2" in err.value.details()
        stats = fl.stats()
        assert stats["requests"] == stats["failed"] == 2 and m.in_flight == 0
        assert stats["members"]["a:1"]["items"] == {"unread": 2, "internal": 2}

    asyncio.run(main())


@pytest.mark.parametrize("setting, value", [
    ("load_factor", 0.5), ("load_factor", float("nan")), ("floor", 0), ("affinity_keys", -1),
    ("affinity_wait", float("inf")), ("timeout", 0), ("timeout", -1.0),
    ("attempt_timeout", 0.0), ("max_message_mb", 0), ("max_message_mb", 4096),
    ("join_timeout", 0), ("eject_after", 0), ("eject_base_s", 0.0),
    ("eject_base_s", float("inf")), ("keepalive_s", 0.5),
])
def test_fleet_settings_are_checked(setting, value):
    """The library checks its settings as the router checks its flags."""
    with pytest.raises(ValueError, match=f"^{setting} must be"):
        Fleet([], **{setting: value})


def test_per_call_timeout_zero_is_refused_not_taken_for_none():
    async def main():
        fl = Fleet([], keepalive_s=0, timeout=30)
        with pytest.raises(ValueError, match="timeout must be"):
            await fl.route(pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")]),
                           passthrough, timeout=0)

    asyncio.run(main())


def test_routed_client_that_fails_to_start_leaves_no_thread():
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ValueError, match="load_factor"):
        RoutedClient(["a:1"], load_factor=0.5)
    left = [t for t in threading.enumerate()
            if t.ident not in before and t.name == "smg-fast-routing"]
    assert not left  # the private loop's thread does not outlive the refusal


def test_targets_are_checked_and_one_string_is_one_member():
    """AsyncRoutedClient("127.0.0.1:1") is one member, not one per character of the string.

    An empty list or a malformed target is refused, by both clients (the synchronous one
    before it starts its thread) and by add()."""
    async def main():
        async with AsyncRoutedClient("127.0.0.1:1", keepalive_s=0, join_timeout=2) as rc:
            assert list(rc.membership.members) == ["127.0.0.1:1"]
            with pytest.raises(ValueError, match="HOST:PORT"):
                await rc.add("nohost")
        for bad in ([], (), ["127.0.0.1"], ["127.0.0.1:0"], ["a:1", ":5"], ["[]:1"], [None]):
            with pytest.raises(ValueError, match="HOST:PORT"):
                AsyncRoutedClient(bad, keepalive_s=0)

    asyncio.run(main())
    before = {t.ident for t in threading.enumerate()}
    with RoutedClient("127.0.0.1:1", keepalive_s=0, join_timeout=2) as rc:
        assert list(rc.stats()["members"]) == ["127.0.0.1:1"]
    for bad in ([], "127.0.0.1:99999", ["x:1", "y"]):
        with pytest.raises(ValueError, match="HOST:PORT"):
            RoutedClient(bad)
    assert not [t for t in threading.enumerate()
                if t.ident not in before and t.name == "smg-fast-routing"]


def test_a_failure_not_retried_forgets_the_member_as_holder():
    """A sub-call that fails without a retry does not make its member the image's holder.

    Such a sub-call (INVALID_ARGUMENT here) made nothing the fleet knows of: affinity does not name
    its member as the image's holder, so the next request for the image neither waits for it nor
    goes to it for a cache hit it does not have."""
    async def main():
        fl = Fleet([], keepalive_s=0)
        fail = [True]

        async def handler(sub):
            if fail[0]:
                raise error(_C.INVALID_ARGUMENT, "item 0: cannot decode")
            return response([""] * len(sub.items))

        m = member(fl, "a:1", handler)
        image = pb.MediaItem(data=b"x")
        key = item_key(image, MODEL, "", None, None)
        req = pb.PreprocessRequest(items=[image])
        with pytest.raises(RoutedError) as err:
            await fl.route(req, passthrough, timeout=30)
        assert err.value.code() == _C.INVALID_ARGUMENT and err.value.index == 0
        assert fl.affinity.holders(key, {"a:1": m.joins}) == []
        fail[0] = False
        await fl.route(req, passthrough, timeout=30)
        assert fl.affinity.holders(key, {"a:1": m.joins}) == ["a:1"]  # a success records it

    asyncio.run(main())


def test_routed_client_used_after_close_says_so():
    """A routed client called after close() raises 'closed'.

    Not the loop's 'Event loop is closed', and no never-awaited coroutine warning."""
    rc = RoutedClient("127.0.0.1:1", keepalive_s=0, join_timeout=1)
    rc.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for use in (lambda: rc.preprocess([b"x"]), lambda: rc.add("127.0.0.1:2"), rc.stats):
            with pytest.raises(RuntimeError, match="RoutedClient is closed"):
                use()
        rc.close()  # (twice is fine)


def test_a_video_counts_its_size_in_the_load_bound():
    """A video weighs one unit per MiB of its bytes while in flight; images after it spill.

    Two members, floor 1: while a 6 MiB video is in flight on its member, that member is over
    the bound for the images that follow (each 1), which go to the other; all is given back."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)
        release = asyncio.Event()

        async def answer(sub):
            if any(it.HasField("video") for it in sub.items):
                await release.wait()
            return response([""] * len(sub.items))

        a, b = member(fl, "a:1", answer), member(fl, "b:2", answer)
        video = pb.MediaItem(data=bytes(6 << 20) + b"clip", video=pb.VideoOptions(fps=2))
        assert item_weight(video) == 7 and item_weight(pb.MediaItem(data=b"x")) == 1
        assert item_weight(pb.MediaItem(url="file:///v.mp4", video=pb.VideoOptions())) == 8
        t = asyncio.ensure_future(fl.route(pb.PreprocessRequest(items=[video]), passthrough, 30))
        for _ in range(100):
            if a.in_flight + b.in_flight:
                break
            await asyncio.sleep(0.01)
        holder, other = (a, b) if a.in_flight else (b, a)
        assert (holder.in_flight, other.in_flight) == (7, 0)
        images = [pb.MediaItem(data=b"image %d" % k) for k in range(6)]
        await fl.route(pb.PreprocessRequest(items=images), passthrough, 30)
        assert other.stub.calls == 1 and holder.stub.calls == 1  # only the video went there
        release.set()
        await t
        assert (a.in_flight, b.in_flight) == (0, 0)

    asyncio.run(main())
