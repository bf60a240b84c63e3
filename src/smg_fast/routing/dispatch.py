"""One routed request: each image placed on a member (placement.py), one Preprocess sub-call per
member with its items, all at once under the caller's deadline, results reassembled in the
caller's order. An image goes only to a member that serves the request's model. Only items whose
sub-call failed with a transient code are sent again, each to its key's next member; anything
else fails the request naming the caller's item index. Sub-calls the request no longer needs (it
failed, or was cancelled, or their member went away) are cancelled, and what they answer anyway
is released, as is what the finished ones made for a request that then failed: shm segments
unlinked (when they are in our /dev/shm), RDMA handles left to expire.

``Fleet`` is the core the library clients (client.py) and the router process (router.py) share:
they differ only in what they make of a member's response (``finish``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import grpc

from .._service.channel import keepalive_options, message_size_options
from .._service.wire import MAX_ITEMS, says_retryable, too_many_items
from ..transport.tensors import shm_namespace
from .checks import check_settings, check_target, check_targets
from .forwarded_caller import caller_metadata
from .membership import Member, Membership
from .messages import release, sub_request, without_items
from .placement import Affinity, Choice, choose, item_key
from .routed_error import RoutedError, name_items, renumber

log = logging.getLogger("smg_fast.routing")

_C = grpc.StatusCode
CHECK_MIN_S = 1.0  # the shortest health Check that confirms a member whose sub-call timed out
WAIT_SHARE = 0.5  # of the caller's timeout, the most an image may wait for a member that has it
TIMINGS = ("queue_us", "decode_us", "preprocess_us", "transport_us", "total_us")
# What a member's response becomes for the caller: one value per item, in the sub-call's order.
Finish = Callable[[Member, Any], Awaitable[list[Any]]]
_F = TypeVar("_F", bound="Fleet")


class Fleet:
    """The members, the counters, and the request loop.

    ``load_factor``: a member may hold ceil(load_factor x (in-flight + 1) / members) items, and
    at least ``floor`` (so a quiet fleet keeps every image on its first choice).
    ``affinity_keys``: how many recent keys the fleet remembers the members of, so that a key
    goes back to a member that has its pixels while one is under the bound (0: rendezvous
    order under the bound only); ``affinity_wait``: how long (seconds) at most an image whose
    members are all at the bound may wait in the fleet for one of them that will free a slot
    soon before it spills to a member that has to compute it again (see placement.py), and at most
    half the caller's timeout.
    ``eject_after`` consecutive transport failures eject a member for ``eject_base_s``,
    doubling per repeat, then one request probes it. ``attempt_timeout``: the longest one
    sub-call may take (None: the caller's deadline); past it the items go to their next
    member, and the member counts as failed only when a health Check goes unanswered too
    (Membership.verify). ``keepalive_s``: see _service.channel.keepalive_options."""

    def __init__(self, targets: str | Iterable[str], *, load_factor: float = 1.25, floor: int = 4,
                 affinity_keys: int = 65536, affinity_wait: float = 0.01,
                 timeout: float | None = None, attempt_timeout: float | None = None,
                 max_message_mb: int = 256, join_timeout: float = 10.0, eject_after: int = 3,
                 eject_base_s: float = 1.0, keepalive_s: float = 10.0) -> None:
        check_settings(load_factor=load_factor, floor=floor, affinity_keys=affinity_keys,
                       affinity_wait=affinity_wait, timeout=timeout,
                       attempt_timeout=attempt_timeout, max_message_mb=max_message_mb,
                       join_timeout=join_timeout, eject_after=eject_after,
                       eject_base_s=eject_base_s, keepalive_s=keepalive_s)
        targets = check_targets(targets, allow_empty=True)  # (members may come by add())
        self.load_factor, self.floor, self.timeout = load_factor, floor, timeout
        self.affinity = Affinity(affinity_keys)
        self.affinity_wait = affinity_wait
        self._waiting: Counter[str] = Counter()  # target -> items waiting in the fleet for it
        self.attempt_timeout, self.join_timeout = attempt_timeout, join_timeout
        self.namespace = shm_namespace()
        self.membership = Membership(
            channel_options=(message_size_options(max_message_mb * 2**20)
                             + keepalive_options(keepalive_s)),
            eject_after=eject_after, eject_base_s=eject_base_s, probe_s=keepalive_s)
        founders = self.membership.found(targets, join_timeout)
        # one join every request waits for (shielded: a caller that leaves does not end it)
        self._joining = (asyncio.get_running_loop().create_task(self._join(founders))
                         if founders else None)
        self._tasks: set[asyncio.Future] = set()  # sub-calls abandoned, still ending
        self.counts: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()

    # ---- membership ----

    async def _ready(self) -> None:
        """Waits for the members given at start to join (every caller the same join)."""
        if self._joining is not None and not self._joining.done():
            await asyncio.shield(self._joining)

    async def _join(self, founders: list[Member]) -> None:
        """The founders' admission (membership.found), then their first health answers; at
        most join_timeout in all (a member still joining is placed on once SERVING)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.join_timeout
        await self.membership.founded()
        waits = [asyncio.ensure_future(m.joined.wait()) for m in founders]
        _, slow = await asyncio.wait(waits, timeout=max(0.0, end - loop.time()))
        for w in slow:
            w.cancel()

    async def add(self, target: str) -> bool:
        """Joins target; True once it serves, False when it was refused (a different config) or
        did not serve within join_timeout. Concurrent adds of one target share its joining."""
        m = self.membership.add(check_target(target))
        return await self.membership.settled(m, self.join_timeout)

    async def remove(self, target: str) -> None:
        """Stops placing on target; its calls in flight are retried elsewhere."""
        await self.membership.remove(target)

    def stats(self) -> dict[str, Any]:
        return {**dict(self.counts), "retries": dict(self.retries), **self.membership.stats()}

    # ---- one request ----

    async def route(self, req: Any, finish: Finish,
                    timeout: float | None = None) -> tuple[list[Any], dict[str, int]]:
        """Serves req (its model resolved here) over the fleet: finish's values in the
        caller's order, and the slowest sub-call's timings. Raises RoutedError."""
        if not req.items:  # as a server answers it
            raise RoutedError(_C.INVALID_ARGUMENT, "request has no items")
        if len(req.items) > MAX_ITEMS:  # as a server answers it, before any member works on it
            raise RoutedError(_C.INVALID_ARGUMENT, too_many_items(len(req.items)))
        await self._ready()
        loop = asyncio.get_running_loop()
        timeout = self.timeout if timeout is None else timeout
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be None or > 0 seconds, got {timeout!r}")
        deadline = None if timeout is None else loop.time() + timeout
        name = req.model or self.membership.default_model
        lo = req.min_pixels if req.HasField("min_pixels") else None
        hi = req.max_pixels if req.HasField("max_pixels") else None
        keys = [item_key(it, name, req.dtype, lo, hi) for it in req.items]
        local = req.shm_namespace == self.namespace  # its segments are in our /dev/shm
        template = without_items(req, name)
        n = len(keys)
        results: list[Any] = [None] * n
        kept: list[Any] = []  # the answers whose handles are in results
        tried: list[set[str]] = [set() for _ in range(n)]
        last: list[tuple[grpc.StatusCode, str] | None] = [None] * n
        timings: Counter[str] = Counter()
        pending = list(range(n))
        live: dict[asyncio.Task, tuple[Member, list[int]]] = {}
        self.counts["requests"] += 1
        # images may wait for their members, at most half the caller's time: the rest is
        # for the sub-call itself
        patient_until = loop.time() + min(self.affinity_wait,
                                          WAIT_SHARE * timeout if timeout is not None
                                          else self.affinity_wait)
        waited: set[int] = set()
        try:
            while pending or live:
                if pending and deadline is not None and loop.time() >= deadline:
                    # no time left to send them in: failed here, no member charged for it
                    text, index = name_items("the request's deadline passed before it was "
                                             "sent to a member", pending)
                    raise RoutedError(_C.DEADLINE_EXCEEDED, text, index)
                placed, waits_on = self._place(name, pending, keys, tried, last,
                                               loop.time() < patient_until)
                pending = sorted(waits_on)  # item -> the member it waits for (holding it)
                freed: list[asyncio.Future] = []
                try:
                    for m, (idx, epoch, probe) in placed.items():
                        task = loop.create_task(self._call(m, epoch, probe, idx, req,
                                                           template, deadline, finish, local))
                        live[task] = (m, idx)
                    if waits_on:  # placed again when one of those members ends a call
                        self.counts["waited"] += len(set(waits_on) - waited)
                        waited.update(waits_on)
                        freed = [asyncio.ensure_future(self.membership.members[t].freed.wait())
                                 for t in set(waits_on.values())]
                    done, _ = await asyncio.wait(
                        {*live, *freed}, return_when=asyncio.FIRST_COMPLETED,
                        timeout=max(0.0, patient_until - loop.time()) if waits_on else None)
                finally:
                    for f in freed:
                        f.cancel()
                    self._unwait(waits_on)  # (placed again next, or the request ended)
                done.difference_update(freed)
                for task in done:
                    m, idx = live.pop(task)
                    status, value = task.result()
                    if status == "ok":
                        resp, values = value
                        kept.append(resp)
                        for i, v in zip(idx, values, strict=True):
                            results[i] = v
                        for k in TIMINGS:  # the calls ran side by side
                            timings[k] = max(timings[k], getattr(resp.timings, k))
                        continue
                    code, details, retry = value
                    text, index = renumber(details, idx)
                    if not retry or (deadline is not None and loop.time() >= deadline):
                        for i in idx:  # it may not have made them: not a holder any more
                            self.affinity.forget(keys[i], m.target)
                        if index is None:
                            text, index = name_items(text, idx)
                        raise RoutedError(code, text, index, code == _C.RESOURCE_EXHAUSTED
                                          and retry)
                    for i in idx:
                        tried[i].add(m.target)
                        last[i] = (code, text)
                        self.affinity.forget(keys[i], m.target)
                    pending.extend(idx)
                pending.sort()
        except BaseException:
            self.counts["failed"] += 1  # (an error, a finish that raised, or its caller left)
            for task in live:  # a failed or cancelled request: its other sub-calls stop
                if task.done() and not task.cancelled() and task.exception() is None:
                    status, value = task.result()
                    if status == "ok":  # answered in the same moment as the failure
                        kept.append(value[0])
                    continue
                task.cancel()
                self._keep(task)
            if local:  # nobody will read what the finished sub-calls made
                for resp in kept:
                    self.discard(resp)
            raise
        self.counts["items"] += n
        return results, dict(timings)

    def discard(self, resp: Any) -> None:
        """Unlinks the shm segments of an answer nobody will read (its request failed, or its
        caller left); only for a caller in our shm namespace. finish may have read some
        already (read_response unlinks as it maps): those are gone, and not counted."""
        self.counts["unread_released"] += release(resp)

    def _keep(self, fut: asyncio.Future) -> None:
        """Holds an abandoned future until it ends (close() waits for it)."""
        self._tasks.add(fut)
        fut.add_done_callback(self._tasks.discard)

    def _place(self, model: str, pending: list[int], keys: list[bytes],
               tried: list[set[str]], last: list[tuple[grpc.StatusCode, str] | None],
               patient: bool = False,
               ) -> tuple[dict[Member, tuple[list[int], int, bool]], dict[int, str]]:
        """Each pending item's member (one serving the model, not one it already failed on),
        under the load bound; with each member, its ejection epoch now (a failure counts only
        within it) and whether this call is its half-open probe; and, when ``patient``, the
        items that wait, each for a member holding its image that will free a slot soon
        (placement.choose), counted as waiting for it until the caller's ``_unwait``. Counts
        spills and retries only when every item was placed (a request that fails here sends
        nothing)."""
        if not pending:
            return {}, {}
        usable = {m.target: m for m in self.membership.usable() if m.serves(model)}
        names = self.membership.model_names()  # (none: no member admitted, so who knows)
        known = model in names or model in self.membership.known_models
        if not usable and names and not known:
            i = pending[0]
            raise RoutedError(_C.INVALID_ARGUMENT, f"unknown model {model!r} (item {i}): no "
                              f"member of the fleet serves it; the fleet serves {names}", i)
        load = {t: m.in_flight for t, m in usable.items()}
        joins = {t: m.joins for t, m in usable.items()}
        groups: dict[Member, list[int]] = {}
        chosen: list[tuple[bytes, str]] = []
        spills = affine = 0
        queued = Counter(self._waiting)  # items waiting per member, this request's included
        deferred: dict[int, str] = {}
        retried: Counter[str] = Counter()
        for i in pending:
            candidates = [t for t in usable if t not in tried[i]]
            if not candidates:
                code, details = last[i] or (_C.UNAVAILABLE, "no serving member in the fleet"
                                            + (f" serves model {model!r}" if model else ""))
                raise RoutedError(code, f"{details} (item {i}, tried on {len(tried[i])} "
                                        "member(s))", i, code == _C.RESOURCE_EXHAUSTED)
            holders = self.affinity.holders(keys[i], joins)
            target, spilled, wait, first = self._choose(
                keys[i], candidates, load, holders, patient and last[i] is None, queued)
            if wait:  # its members are all at the bound: it waits for target
                deferred[i] = target
                queued[target] += 1
                continue
            chosen.append((keys[i], target))
            load[target] += 1
            spills += spilled
            affine += target in holders and target != first
            if last[i] is not None:  # placed again after a retryable failure
                retried[last[i][0].name.lower()] += 1
            groups.setdefault(usable[target], []).append(i)
        self.counts["spills"] += spills
        self.counts["affinity"] += affine
        self.retries.update(retried)
        for key, target in chosen:
            self.affinity.add(key, target, joins[target])
        self._waiting.update(deferred.values())
        out = {}
        for m, idx in groups.items():
            m.probing = m.ejections > 0  # half-open: this call decides
            # counted at once, so that requests placed in the same moment see each other
            m.in_flight += len(idx)
            out[m] = (idx, m.epoch, m.probing)
        return out, deferred

    def _choose(self, key: bytes, candidates: list[str], load: dict[str, int],
                holders: list[str], wait: bool, waiting: Mapping[str, int]) -> Choice:
        """placement.choose for one key (a benchmark overrides this to compare policies)."""
        return choose(key, candidates, load, self.load_factor, self.floor, holders, wait,
                      waiting)

    def _unwait(self, waits_on: dict[int, str]) -> None:
        """The items of waits_on no longer wait for their members."""
        self._waiting.subtract(waits_on.values())
        for t in set(waits_on.values()):
            if self._waiting[t] <= 0:
                del self._waiting[t]

    async def _call(self, m: Member, epoch: int, probe: bool, idx: list[int], req: Any,
                    template: Any, deadline: float | None, finish: Finish,
                    local: bool) -> tuple[str, Any]:
        """("ok", (response, values)) or ("error", (code, details, retry)); the member's
        in-flight count covers the RPC until it really ends. A probe (half-open) that ends
        without a verdict (cancelled) lets the next request probe."""
        sub = sub_request(template, req, idx)
        loop = asyncio.get_running_loop()
        left = None if deadline is None else max(0.0, deadline - loop.time())
        if left == 0:  # (it passed since _place): sent with no time, it would be charged to m
            m.in_flight -= len(idx)
            m.probing = m.probing and not probe
            m.freed.set()
            m.freed = asyncio.Event()
            return "error", (_C.DEADLINE_EXCEEDED, "the request's deadline passed before it "
                                                   "was sent to a member", False)
        limit = left
        if self.attempt_timeout is not None and (left is None or self.attempt_timeout < left):
            limit = self.attempt_timeout  # a deadline of its own: hitting it is the member's
        try:  # (the in-flight count was taken by _place; released when the RPC really ends)
            call = m.stub.Preprocess(sub, timeout=limit, **caller_metadata())
            rpc = asyncio.ensure_future(call)
        except BaseException:
            m.in_flight -= len(idx)
            if probe:
                m.probing = False
            raise

        def ended(_: asyncio.Future) -> None:
            m.in_flight -= len(idx)
            m.freed.set()  # wakes the requests whose images wait for m
            m.freed = asyncio.Event()

        def abandon() -> None:  # nobody will use this answer
            rpc.add_done_callback(lambda f: self._release_rpc(f, local))
            call.cancel()
            self._keep(rpc)

        rpc.add_done_callback(ended)
        lost = asyncio.ensure_future(m.lost.wait())
        try:
            await asyncio.wait({rpc, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            abandon()
            if probe:  # else the member would never be placed on again
                m.probing = False
            self._outcome(m, "cancelled", len(idx))
            raise
        finally:
            lost.cancel()
        if not rpc.done():  # the member went away: its answer, if any, is not ours any more
            abandon()
            self.membership.failure(m, epoch)
            self._outcome(m, "abandoned", len(idx))
            return "error", (_C.UNAVAILABLE, f"{m.target} stopped serving", True)
        if rpc.cancelled():  # (the channel was closed under it: remove())
            if probe:
                m.probing = False
            self._outcome(m, "abandoned", len(idx))
            return "error", (_C.UNAVAILABLE, f"{m.target} was removed", True)
        exc = rpc.exception()
        if isinstance(exc, grpc.aio.AioRpcError):
            code = exc.code()
            own = limit is not None and limit != left  # the sub-call's deadline, not the caller's
            if code in (_C.UNAVAILABLE, _C.CANCELLED):
                self.membership.failure(m, epoch)  # a peer that died or left
                retry = True
            elif code == _C.DEADLINE_EXCEEDED and own:  # slow work, or a hung peer: ask it
                if probe:  # its verdict is the health Check's
                    m.probing = False
                self._keep(loop.create_task(self.membership.verify(
                    m, epoch, max(CHECK_MIN_S, limit or 0.0))))
                retry = True
            elif code == _C.DEADLINE_EXCEEDED:  # the caller's time ran out: says nothing of m
                if probe:  # its verdict is still to come: the next request probes
                    m.probing = False
                retry = False
            else:  # the member answered: it is alive
                self.membership.success(m)
                retry = code == _C.RESOURCE_EXHAUSTED and says_retryable(exc)
            self._outcome(m, code.name.lower(), len(idx))
            return "error", (code, exc.details() or "", retry)
        resp = rpc.result()
        self.membership.success(m)
        if len(resp.items) != len(idx):
            if local:
                self.discard(resp)
            self._outcome(m, "internal", len(idx))
            return "error", (_C.INTERNAL, f"{m.target} answered {len(resp.items)} items for "
                                          f"{len(idx)}", False)
        try:
            values = await finish(m, resp)
        except BaseException as exc:  # (the answer could not be read, or the caller left)
            if local:
                self.discard(resp)  # what finish had not reached yet
            cancelled = isinstance(exc, asyncio.CancelledError)
            self._outcome(m, "cancelled" if cancelled else "unread", len(idx))
            raise
        self._outcome(m, "ok", len(idx))
        return "ok", (resp, values)

    def _outcome(self, m: Member, outcome: str, n: int) -> None:
        m.items[outcome] = m.items.get(outcome, 0) + n

    def _release_rpc(self, rpc: asyncio.Future, local: bool) -> None:
        if not rpc.cancelled() and rpc.exception() is None:
            self.counts["late_responses"] += 1
            if local:
                self.counts["late_released"] += release(rpc.result())

    async def close(self) -> None:
        """Removes every member and waits for the sub-calls abandoned before (cancelled)."""
        if self._joining is not None:
            self._joining.cancel()
        await self.membership.close()
        rest = list(self._tasks)
        for fut in rest:
            fut.cancel()
        if rest:
            await asyncio.wait(rest, timeout=5.0)

    async def __aenter__(self: _F) -> _F:
        await self._ready()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

