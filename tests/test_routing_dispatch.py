"""Fleet.route against in-process fake members (stubs whose answers the test scripts; no
server, no network): a cancelled half-open probe frees its member, every member busy is a
retryable failure with retries counted only for items placed again, a failed or cancelled
request unlinks the shm segments its finished sub-calls made, items go only to members that
serve their model, placement counts nothing for a request it fails, an image whose remembered
member is at the bound waits for it (and spills once the wait is over), and an empty request is
refused as a server refuses it."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from smg_fast._proto import preprocessor_pb2 as pb
from smg_fast.routing import AsyncRoutedClient, RoutedClient, RoutedError
from smg_fast.routing.dispatch import Fleet
from smg_fast.routing.membership import Member
from smg_fast.routing.placement import item_key, order

_C = grpc.StatusCode
MODEL = "qwen2_vl"


class _Call:
    """What a grpc.aio unary call offers Fleet: awaitable, cancellable."""

    def __init__(self, coro) -> None:
        self.task = asyncio.ensure_future(coro)

    def __await__(self):
        return self.task.__await__()

    def cancel(self) -> None:
        self.task.cancel()


class _Stub:
    def __init__(self, handler) -> None:
        self.handler, self.calls = handler, 0

    def Preprocess(self, sub, timeout=None):  # noqa: N802 (the gRPC method's name)
        self.calls += 1
        return _Call(self.handler(sub))


def _member(fleet: Fleet, target: str, handler, models=(MODEL,)) -> Member:
    info = pb.GetModelInfoResponse(default_model=models[0], models=[
        pb.ModelInfo(name=name, config_fingerprint="fp-" + name) for name in models])
    m = Member(target, None, _Stub(handler), info=info, last_info=info, state="serving")
    fleet.membership.members[target] = m
    fleet.membership.known_models.update(models)  # as admission records them
    return m


def _error(code: grpc.StatusCode, details: str, retryable: str | None = None):
    trailers = grpc.aio.Metadata(("smg-fast-retryable", retryable)) if retryable else None
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers or grpc.aio.Metadata(),
                                details=details)


def _segment() -> str:
    """An smg-fast-shaped segment in /dev/shm (as a server's answer would name)."""
    name = f"smg-fast-{os.getpid()}-{secrets.token_hex(8)}-1"
    with open(f"/dev/shm/{name}", "wb") as f:
        f.write(b"\0" * 64)
    return name


def _answer(names: list[str]) -> pb.PreprocessResponse:
    resp = pb.PreprocessResponse()
    for name in names:
        resp.items.add().pixel_values.shm.name = name
    return resp


async def _passthrough(m, resp):
    return list(resp.items)


def _two_images(targets: list[str]) -> tuple[pb.MediaItem, pb.MediaItem]:
    """Two images whose first choices are targets[0] and targets[1]."""
    def first(item):
        return order(item_key(item, MODEL, "", None, None), targets)[0]

    found = {}
    for k in range(500):
        item = pb.MediaItem(data=b"image %d" % k)
        found.setdefault(first(item), item)
        if len(found) == len(targets):
            return found[targets[0]], found[targets[1]]
    raise AssertionError("no images for both members")


def test_cancelled_probe_frees_the_member():
    """The caller cancels while the half-open probe is in flight: the next request probes
    again (before: probing stayed True and the member was never placed on again)."""
    async def main():
        fl = Fleet([], keepalive_s=0)
        hang = asyncio.Event()

        async def handler(sub):
            if not hang.is_set():
                await asyncio.Event().wait()  # the probe: never answers
            return _answer([""] * len(sub.items))

        m = _member(fl, "a:1", handler)
        m.ejections, m.ejected_until = 1, 0.0  # ejected once, its span over: half-open
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
        t = asyncio.ensure_future(fl.route(req, _passthrough, timeout=30))
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
        items, _ = await fl.route(req, _passthrough, timeout=30)  # probed again: it answers
        assert len(items) == 1 and m.ejections == 0 and m.in_flight == 0
        fl.membership._set_state(m, "serving")
        m.ejections, m.probing = 1, True
        fl.membership._set_state(m, "down")  # a probe's member that goes away
        assert not m.probing

    asyncio.run(main())


def test_every_member_busy_is_retryable():
    """Both members answer RESOURCE_EXHAUSTED marked retryable: the request fails retryable
    (the router's trailer says 1), and one retry is counted (the item went to b once), not
    two (before: retryable=False, and a retry counted for the item that went nowhere)."""
    async def main():
        fl = Fleet([], keepalive_s=0)

        async def busy(sub):
            raise _error(_C.RESOURCE_EXHAUSTED, "server busy: 1 request queued", "1")

        stubs = [_member(fl, t, busy).stub for t in ("a:1", "b:2")]
        req = pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")])
        with pytest.raises(RoutedError) as err:
            await fl.route(req, _passthrough, timeout=30)
        assert err.value.code() == _C.RESOURCE_EXHAUSTED and err.value.retryable
        assert err.value.index == 0 and "tried on 2 member(s)" in err.value.details()
        assert fl.stats()["retries"] == {"resource_exhausted": 1}
        assert [s.calls for s in stubs] == [1, 1]

    asyncio.run(main())


@pytest.mark.parametrize("how", ["later", "same_moment", "cancelled"])
def test_failed_request_releases_finished_sub_calls(how):
    """One sub-call answers with a shm segment; the other fails (later, or in the same loop
    turn), or the caller cancels: nobody will read the segment, so it is unlinked (before:
    it stayed in /dev/shm until the worker exited)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)
        name = _segment()
        gate = asyncio.get_running_loop().create_future()

        async def good(sub):
            if how == "same_moment":
                await gate
            return _answer([name])

        async def bad(sub):
            if how == "cancelled":
                await asyncio.Event().wait()
            if how == "same_moment":
                await gate
            else:
                await asyncio.sleep(0.1)
            raise _error(_C.INVALID_ARGUMENT, "item 0: not an image")

        _member(fl, "a:1", good)
        _member(fl, "b:2", bad)
        first, second = _two_images(["a:1", "b:2"])
        req = pb.PreprocessRequest(items=[first, second], shm_namespace=fl.namespace)
        t = asyncio.ensure_future(fl.route(req, _passthrough, timeout=30))
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
            assert fl.stats()["failed"] == 1  # (before: not when its caller left)
        finally:
            if os.path.exists(f"/dev/shm/{name}"):
                os.unlink(f"/dev/shm/{name}")

    asyncio.run(main())


def test_items_go_only_to_members_serving_their_model():
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)

        async def answer(sub):
            return _answer([""] * len(sub.items))

        qwen = _member(fl, "a:1", answer, models=(MODEL,))
        kimi = _member(fl, "b:2", answer, models=("kimi_k25",))
        items = [pb.MediaItem(data=b"image %d" % k) for k in range(12)]
        await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), _passthrough, 30)
        assert (qwen.stub.calls, kimi.stub.calls) == (0, 1)
        await fl.route(pb.PreprocessRequest(items=items), _passthrough, 30)  # default: qwen
        assert (qwen.stub.calls, kimi.stub.calls) == (1, 1)
        with pytest.raises(RoutedError) as err:  # before: placed on both anyway
            await fl.route(pb.PreprocessRequest(items=items, model="nope"), _passthrough, 30)
        assert err.value.code() == _C.INVALID_ARGUMENT and err.value.index == 0
        assert "'nope'" in err.value.details() and "item 0" in err.value.details()
        kimi.state = "down"  # a model the fleet knows, its member not serving: transient
        with pytest.raises(RoutedError) as err:
            await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), _passthrough,
                           30)
        assert err.value.code() == _C.UNAVAILABLE
        fl.membership._leave(kimi)  # crashed: no longer admitted, its models forgotten
        with pytest.raises(RoutedError) as err:  # still transient: retry, not "unknown model"
            await fl.route(pb.PreprocessRequest(items=items, model="kimi_k25"), _passthrough,
                           30)
        assert err.value.code() == _C.UNAVAILABLE

    asyncio.run(main())


def test_placement_that_fails_counts_nothing():
    """Item 0 spills, item 1 has no member left: nothing is sent, so no spill, no retry and
    no in-flight count stays behind (before: the spill was counted)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1)

        async def answer(sub):
            return _answer([""] * len(sub.items))

        a, b = _member(fl, "a:1", answer), _member(fl, "b:2", answer)
        first, _ = _two_images(["a:1", "b:2"])
        a.in_flight = 5  # over the bound: item 0 spills to b
        keys = [item_key(first, MODEL, "", None, None)] * 2
        last = [None, (_C.RESOURCE_EXHAUSTED, "busy")]
        with pytest.raises(RoutedError) as err:
            fl._place(MODEL, [0, 1], keys, [set(), {"a:1", "b:2"}], last)
        assert err.value.index == 1 and err.value.retryable
        assert fl.counts["spills"] == 0 and fl.retries == {}
        assert (a.in_flight, b.in_flight) == (5, 0)

    asyncio.run(main())


def _image_preferring(target: str, targets: list[str]) -> pb.MediaItem:
    for k in range(500):
        item = pb.MediaItem(data=b"image %d" % k)
        if order(item_key(item, MODEL, "", None, None), targets)[0] == target:
            return item
    raise AssertionError(f"no image prefers {target}")


@pytest.mark.parametrize("wait_s", [30.0, 0.05])
def test_image_waits_for_the_member_that_has_it(wait_s):
    """An image is in flight on a:1, its first choice, which is then at the bound (floor 1,
    1 item of 1): the same image again waits in the fleet, sent nowhere, while a caller that
    gives up meanwhile leaves nothing behind; when a:1's call ends it goes back to a:1 (a cache
    hit there, no spill), or, once affinity_wait is over, to its next member (one spill)."""
    async def main():
        fl = Fleet([], keepalive_s=0, floor=1, affinity_wait=wait_s)
        release = asyncio.Event()

        async def slow(sub):
            await release.wait()
            return _answer([""] * len(sub.items))

        async def quick(sub):
            return _answer([""] * len(sub.items))

        targets = ["a:1", "b:2", "c:3"]
        members = {t: _member(fl, t, slow if t == "a:1" else quick) for t in targets}
        image = _image_preferring("a:1", targets)
        req = pb.PreprocessRequest(items=[image])
        first = asyncio.ensure_future(fl.route(req, _passthrough, timeout=30))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(fl.route(req, _passthrough, timeout=30))
        await asyncio.sleep(0.01)
        gone.cancel()  # its caller leaves while it waits
        with pytest.raises(asyncio.CancelledError):
            await gone
        second = asyncio.ensure_future(fl.route(req, _passthrough, timeout=30))
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


def test_sub_calls_copy_only_their_own_images():
    """A 32 MiB request spread over 4 members: while its sub-calls are in flight the process
    holds about one more copy of the images (before: each sub-call copied the whole request,
    then dropped the others' items; 5 copies). Peak memory of a fresh process, not time."""
    import smg_fast

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(smg_fast.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name(
        "routing_copy_script.py"))], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    size_kib, grown_kib, calls = map(int, out.stdout.split())
    assert calls >= 3  # spread (rendezvous over 4 members)
    assert grown_kib < 2 * size_kib, (size_kib, grown_kib)


def test_empty_request_is_refused_as_a_server_refuses_it():
    async def main():
        async with AsyncRoutedClient([], keepalive_s=0) as rc:
            with pytest.raises(RoutedError) as err:
                await rc.preprocess([])
        return err.value

    err = asyncio.run(main())
    assert err.code() == _C.INVALID_ARGUMENT and err.details() == "request has no items"


def test_unreadable_or_miscounted_answers_fail_the_request_and_are_counted():
    """finish raises (an answer that cannot be read), or a member answers the wrong number of
    items: the request fails, counted as failed, the items' outcome recorded on the member
    (before: neither)."""
    async def main():
        fl = Fleet([], keepalive_s=0)

        async def one_short(sub):
            return _answer([""] * (len(sub.items) - 1))

        async def answer(sub):
            return _answer([""] * len(sub.items))

        async def unreadable(m, resp):
            raise ValueError("segment gone")

        items = [pb.MediaItem(data=b"a"), pb.MediaItem(data=b"b")]
        m = _member(fl, "a:1", answer)
        with pytest.raises(ValueError):
            await fl.route(pb.PreprocessRequest(items=items), unreadable, 30)
        m.stub.handler = one_short
        with pytest.raises(RoutedError) as err:
            await fl.route(pb.PreprocessRequest(items=items), _passthrough, 30)
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
    """As the router checks its flags (before: the library took these silently)."""
    with pytest.raises(ValueError, match=f"^{setting} must be"):
        Fleet([], **{setting: value})


def test_per_call_timeout_zero_is_refused_not_taken_for_none():
    async def main():
        fl = Fleet([], keepalive_s=0, timeout=30)
        with pytest.raises(ValueError, match="timeout must be"):
            await fl.route(pb.PreprocessRequest(items=[pb.MediaItem(data=b"x")]),
                           _passthrough, timeout=0)

    asyncio.run(main())


def test_routed_client_that_fails_to_start_leaves_no_thread():
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ValueError, match="load_factor"):
        RoutedClient(["a:1"], load_factor=0.5)
    left = [t for t in threading.enumerate()
            if t.ident not in before and t.name == "smg-fast-routing"]
    assert not left  # before: the private loop's thread ran forever
