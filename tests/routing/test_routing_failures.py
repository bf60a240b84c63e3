"""Routing failures against real server processes.

(Or, for the ejection arithmetic, a Membership without one.) A hung worker (SIGSTOP) is found
by keepalive or by the attempt timeout and its items go elsewhere; a size-limit
RESOURCE_EXHAUSTED, the server's or gRPC's own (a message over the size limit), is not retried
while an admission one is; one crash is one ejection; the caller's own deadline is neither the
member's success nor its failure; sub-calls a failed request no longer needs are cancelled; an
answer that arrives after its items went elsewhere is released; concurrent add()s of one target
wait for its joining; close() ends every task.
"""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest
from support.routing_common import (
    SERVER_ARGS,
    first_choice,
    flat_png,
    png,
    preferring,
)

from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
from smg_fast.routing import AsyncRoutedClient, RoutedClient, RoutedError
from smg_fast.routing.member import Member
from smg_fast.routing.membership import Membership
from smg_fast.testing.servers import ServerProcess

ARGS = [*SERVER_ARGS, "--max-output-mb", "64"]
FLEET_ARGS = ARGS  # the `fleet` fixture's (tests/routing/conftest.py)


@pytest.mark.parametrize("how", ["keepalive", "attempt_timeout"])
def test_hung_worker_is_ejected_and_its_items_go_elsewhere(fleet, how):
    targets = [s.target for s in fleet]
    victim = fleet[2]
    images = preferring(victim.target, targets, 3, start=100 if how == "keepalive" else 200)
    opts = ({"keepalive_s": 1.0} if how == "keepalive"
            else {"keepalive_s": 0, "attempt_timeout": 1.5})
    with RoutedClient(targets, timeout=20, floor=8, **opts) as rc:
        victim.proc.send_signal(signal.SIGSTOP)
        try:
            # a fleet that kept waiting on the hung member would reach the caller's 20 s
            # deadline and fail with it: succeeding at all proves the member was given up
            out = rc.preprocess(images)
            assert all(it.worker != victim.target for it in out.items)
            assert len(out.items) == 3
            stats = rc.stats()
            member = stats["members"][victim.target]
            assert "ok" not in member["items"], member
            if how == "keepalive":  # the connection's pings went unanswered: down
                assert member["state"] == "down" or member["ejected"], member
            else:  # its own deadline passed: the member's failure, not the caller's
                assert member["items"].get("deadline_exceeded") == 3, member
            assert sum(stats["retries"].values()) == 3, stats
        finally:
            victim.proc.send_signal(signal.SIGCONT)
        victim.wait(30)


def test_size_limit_is_not_retried(fleet):
    targets = [s.target for s in fleet]
    huge = png(3000, 3000, 7)  # 3000x3000 float32: far over --max-output-mb 64
    with RoutedClient(targets, timeout=30) as rc:
        with pytest.raises(RoutedError) as err:
            rc.preprocess([png(40, 30, 1), huge])
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.value.index == 1 and not err.value.retryable
        assert rc.stats()["retries"] == {}  # the old client tried it on every member
        members = rc.stats()["members"].values()
        # one sub-call failed: the huge image's, with the small one when both landed together
        assert sum(m["items"].get("resource_exhausted", 0) for m in members) in (1, 2)


def test_message_over_the_size_limit_is_not_retried(fleet):
    """An answer over the client's receive limit fails at once, not retryable.

    gRPC's own RESOURCE_EXHAUSTED (a 5 KiB PNG whose 26 MB answer is over the client's 2 MiB receive
    limit) carries no smg-fast-retryable trailer: it would fail the same way on every member, so it
    is answered at once, not retryable (not tried on all three members and reported retryable)."""
    targets = [s.target for s in fleet]
    with RoutedClient(targets, timeout=30, max_message_mb=2) as rc:
        with pytest.raises(RoutedError) as err:
            rc.preprocess([flat_png(1200, 900)], transport="inline")
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert err.value.index == 0 and not err.value.retryable
        assert "tried on" not in err.value.details(), err.value.details()
        stats = rc.stats()
        assert stats["retries"] == {}
        assert sum(m["items"].get("resource_exhausted", 0)
                   for m in stats["members"].values()) == 1


def test_admission_resource_exhausted_is_retried_elsewhere():
    """A server whose admission is full answers RESOURCE_EXHAUSTED with retryable=1.

    The item goes to the next member and the request succeeds."""
    busy = ServerProcess([*ARGS, "--max-queued-requests", "1", "--workers", "1"])
    free = ServerProcess(ARGS)
    try:
        busy.wait()
        free.wait()
        targets = [busy.target, free.target]
        images = preferring(busy.target, targets, 8, start=300)

        async def main():  # 8 at once, all preferring busy (floor 64): it admits one
            async with AsyncRoutedClient(targets, timeout=30, floor=64) as rc:
                outs = await asyncio.gather(*(rc.preprocess([im]) for im in images))
                return outs, rc.stats()

        outs, stats = asyncio.run(main())
        assert all(len(o.items) == 1 for o in outs)
        assert stats["retries"].get("resource_exhausted", 0) >= 1, stats
    finally:
        for s in (busy, free):
            s.kill()
            s.proc.stderr.close()


def test_one_crash_is_one_ejection():
    """Eight calls in flight when a member dies all fail at once.

    One ejection (1 s), not one per failure past the threshold (each doubling the next)."""
    async def main():
        ms = Membership(channel_options=[], eject_after=3, eject_base_s=1.0)
        m = Member("w:1", None, None, state="serving")
        epochs = [m.epoch] * 8  # the calls' epochs when they were placed
        for e in epochs:
            ms.ejection.failure(m, e)
        assert (m.ejections, ms.ejection.ejected) == (1, 1)
        m.ejected_until = 0.0  # the ejection ran out: one probe, which fails
        ms.ejection.failure(m, m.epoch)
        assert (m.ejections, ms.ejection.ejected) == (2, 2)  # now it doubles

    asyncio.run(main())


def test_callers_deadline_is_neither_the_members_success_nor_its_failure(fleet):
    """The caller's own deadline ends a sub-call.

    The member's consecutive failures stay as they were, and a half-open probe that ends so leaves
    the member ejected (the next request probes it) instead of restoring it (it is not the member's
    success)."""
    target, pid = fleet[0].target, fleet[0].pid

    async def main():
        async with AsyncRoutedClient([target], timeout=30, keepalive_s=0) as rc:
            m = rc.membership.members[target]
            m.failures = 2  # two transport failures so far (eject_after 3)
            # The member is stopped (SIGSTOP) while the caller's deadline runs, so no answer can
            # arrive first however the machine is loaded: the deadline always ends the call.
            os.kill(pid, signal.SIGSTOP)
            try:
                with pytest.raises(RoutedError) as err:
                    await rc.preprocess([png(40, 30, 1)], timeout=0.3)
                assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                assert (m.failures, m.ejections) == (2, 0)
                m.failures, m.ejections, m.ejected_until = 0, 1, 0.0  # its ejection ran out
                with pytest.raises(RoutedError):
                    await rc.preprocess([png(40, 30, 2)], timeout=0.3)  # the probe, cut short
                assert m.ejections == 1 and not m.probing  # still half-open, probe-able
            finally:
                os.kill(pid, signal.SIGCONT)
            out = await rc.preprocess([png(40, 30, 3)])  # the next probe is answered
            assert len(out.items) == 1 and (m.failures, m.ejections) == (0, 0)

    asyncio.run(main())


def _slow_and_bad(targets: list[str]) -> tuple[bytes, bytes, str]:
    """A slow image (big, inline) and a bad one whose first choices differ."""
    big = png(1500, 1000, 11)
    slow_member = first_choice(big, targets)
    bad = next(b for k in range(200) if first_choice(b := b"not an image %d" % k, targets)
               != slow_member)
    return big, bad, slow_member


def test_abandoned_sub_calls_are_cancelled(fleet):
    targets = [s.target for s in fleet]
    big, bad, slow_member = _slow_and_bad(targets)

    async def main():
        async with AsyncRoutedClient(targets, timeout=30) as rc:
            with pytest.raises(RoutedError) as err:
                await rc.preprocess([big, bad], transport="inline")
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.index == 1
            await asyncio.sleep(1.5)  # long enough for the big item to have finished
            return rc.stats()

    stats = asyncio.run(main())
    items = stats["members"][slow_member]["items"]
    assert items.get("cancelled") == 1 and "ok" not in items, items
    assert stats.get("late_responses", 0) == 0, stats


class _AnswersAnyway:
    """A member's Preprocess stub, on a channel of its own, whose calls ignore cancel().

    The race a late answer comes from (the answer was on its way when the fleet gave up the call).
    Records the answers."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = pb_grpc.PreprocessorStub(self.channel)
        self.answers: list = []

    def Preprocess(self, sub, timeout=None):  # noqa: N802 (the gRPC method's name)
        owner = self

        class Call:
            def __await__(self):
                return self.answer().__await__()

            async def answer(self):
                resp = await owner.stub.Preprocess(sub, timeout=timeout)
                owner.answers.append(resp)
                return resp

            def cancel(self) -> bool:
                return False

        return Call()


def test_late_answer_is_released(fleet):
    """A member is removed while its sub-call runs.

    The item goes to its next member and the request succeeds; the removed member's answer, arriving
    after that, is counted late and its shm segment unlinked (nobody will read it)."""
    targets = [s.target for s in fleet]
    victim = fleet[1]
    image = preferring(victim.target, targets, 1, start=500, size=(1000, 750))[0]

    async def main():
        async with AsyncRoutedClient(targets, timeout=30, keepalive_s=0) as rc:
            m = rc.membership.members[victim.target]
            m.stub = late = _AnswersAnyway(victim.target)
            try:
                task = asyncio.ensure_future(rc.preprocess([image], transport="shm"))
                while not m.in_flight:
                    await asyncio.sleep(0)
                await rc.remove(victim.target)  # its answer is not ours any more
                out = await task
                for _ in range(600):  # the victim still answers
                    if rc.stats().get("late_responses"):
                        break
                    await asyncio.sleep(0.05)
                return out, rc.stats(), late.answers
            finally:
                await late.channel.close()

    out, stats, answers = asyncio.run(main())
    assert out.items[0].worker != victim.target and len(answers) == 1
    assert stats["retries"] == {"unavailable": 1}
    assert stats["late_responses"] == 1 and stats["late_released"] == 1, stats
    name = answers[0].items[0].pixel_values.shm.name
    assert name.startswith(f"smg-fast-{victim.pid}-") and not os.path.exists(f"/dev/shm/{name}")


def test_concurrent_adds_wait_for_the_join(fleet):
    late = ServerProcess(ARGS)  # not serving yet
    try:
        async def main():
            async with AsyncRoutedClient([fleet[0].target], timeout=30,
                                         join_timeout=60) as rc:
                both = await asyncio.gather(rc.add(late.target), rc.add(late.target))
                return both, rc.stats()

        both, stats = asyncio.run(main())
        assert both == [True, True]
        assert stats["members"][late.target]["state"] == "serving"
    finally:
        late.kill()
        late.proc.stderr.close()


def test_close_ends_every_task(fleet):
    targets = [s.target for s in fleet]
    big, bad, _ = _slow_and_bad(targets)
    rc = RoutedClient(targets, timeout=30)
    rc.preprocess([png(40, 30, 5)])
    with pytest.raises(RoutedError):  # its big item's sub-call is still running now
        rc.preprocess([big, bad], transport="inline")

    async def tasks():
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    pending = rc._run(tasks())
    assert pending  # the members' health followers at least
    rc.close()
    assert all(t.done() for t in pending)
