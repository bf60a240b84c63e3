"""The fleet and its request loop.

Each image of a request placed on a member (placement.py), one Preprocess sub-call per member with
its items (sub_calls.py), all at once under the caller's deadline, results reassembled in the
caller's order (routed_request.py holds one request's state). An image goes only to a member that
serves the request's model. Only items whose sub-call failed with a transient code are sent again,
each to its key's next member; anything else fails the request naming the caller's item index.
Sub-calls the request no longer needs (it failed, or was cancelled, or their member went away) are
cancelled, and what they answer anyway is released, as is what the finished ones made for a request
that then failed: shm segments unlinked (when they are in our /dev/shm), RDMA handles left to
expire.

``Fleet`` is the core the library clients (client.py) and the router process
(smg_fast/router/app.py) share: they differ only in what they make of a member's response
(``finish``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import grpc

from .._service.channel import keepalive_options, message_size_options, reconnect_options
from .._service.wire import MAX_ITEMS, too_many_items
from ..transport.tensors import shm_namespace
from .checks import check_settings, check_target, check_targets, is_dynamic
from .discovery import Discovery
from .hedging import Hedging
from .member import Member
from .membership import RECONNECT_MAX_S, Membership
from .placement import Affinity, Choice, choose, item_key, item_weight, order
from .routed_error import RoutedError, name_items, renumber
from .routed_request import Finish, RoutedRequest
from .sources import FollowsSources
from .sub_calls import SubCalls

log = logging.getLogger("smg_fast.routing")

_C = grpc.StatusCode
WAIT_SHARE = 0.5  # of the caller's timeout, the most an image may wait for a member that has it
_F = TypeVar("_F", bound="Fleet")


class Fleet(FollowsSources):
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
    (health.Ejection.verify). ``keepalive_s``: see _service.channel.keepalive_options.
    Targets may name sources of members (``dns:///NAME:PORT``, ``dns://SERVER/NAME:PORT``,
    ``dns+srv:///NAME``, ``file:///PATH``: discovery.py), read again every ``resolve_every_s``
    seconds and when a member goes down; their members join as any member does (the same checks)
    and leave once their calls in flight ended (sources.py). A sub-call that runs past
    ``hedge_percentile`` of its member's recent latencies is hedged on the next member,
    ``hedge_ratio`` of the sub-calls at most (hedging.py; percentile 0: never)."""

    def __init__(self, targets: str | Iterable[str], *, load_factor: float = 1.25, floor: int = 4,
                 affinity_keys: int = 65536, affinity_wait: float = 0.01,
                 timeout: float | None = None, attempt_timeout: float | None = None,
                 max_message_mb: int = 256, join_timeout: float = 10.0, eject_after: int = 3,
                 eject_base_s: float = 1.0, keepalive_s: float = 10.0,
                 resolve_every_s: float = 5.0, hedge_percentile: float = 95.0,
                 hedge_ratio: float = 0.05) -> None:
        if not (resolve_every_s > 0 and resolve_every_s < float("inf")):
            raise ValueError(f"resolve_every_s must be a finite number of seconds > 0, got "
                             f"{resolve_every_s!r}")
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
        self.join_timeout = join_timeout
        self.namespace = shm_namespace()
        self.membership = Membership(
            channel_options=(message_size_options(max_message_mb * 2**20)
                             + keepalive_options(keepalive_s)
                             + reconnect_options(RECONNECT_MAX_S)),
            eject_after=eject_after, eject_base_s=eject_base_s, probe_s=keepalive_s)
        self.ejection = self.membership.ejection
        self.hedging = Hedging(self.ejection, hedge_percentile, hedge_ratio)
        self.membership.on_removed = self.hedging.forget
        loop = asyncio.get_running_loop()
        self.discovery: Discovery | None = None
        self._watch: asyncio.Task | None = None
        self._retiring: dict[str, asyncio.Task] = {}
        # one join every request waits for (shielded: a caller that leaves does not end it)
        self._joining: asyncio.Task | None = None
        if any(is_dynamic(t) for t in targets):
            self.discovery = Discovery(targets, resolve_every_s, self._discovered)
            self.membership.on_down = lambda m: self.discovery.poke()  # type: ignore[union-attr]
            self._joining = loop.create_task(self._discover_and_join())
        else:
            founders = self.membership.found(targets, join_timeout)
            self._joining = loop.create_task(self._join(founders)) if founders else None
        self.counts: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.calls = SubCalls(self.ejection, self.counts, attempt_timeout)

    # ---- membership ----

    async def _ready(self) -> None:
        """Waits for the members given at start to join (every caller the same join)."""
        if self._joining is not None and not self._joining.done():
            await asyncio.shield(self._joining)

    async def _join(self, founders: list[Member]) -> None:
        """The founders' admission (membership.found), then their first health answers.

        At most join_timeout in all (a member still joining is placed on once SERVING)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.join_timeout
        await self.membership.founded()
        waits = [asyncio.ensure_future(m.joined.wait()) for m in founders]
        _, slow = await asyncio.wait(waits, timeout=max(0.0, end - loop.time()))
        for w in slow:
            w.cancel()

    async def add(self, target: str) -> bool:
        """Joins target.

        True once it serves, False when it was refused (a different config) or did not serve within
        join_timeout. Concurrent adds of one target share its joining."""
        m = self.membership.add(check_target(target))
        return await self.membership.settled(m, self.join_timeout)

    async def remove(self, target: str) -> None:
        """Stops placing on target; its calls in flight are retried elsewhere."""
        await self.membership.remove(target)

    def stats(self) -> dict[str, Any]:
        out = {**dict(self.counts), "retries": dict(self.retries), **self.membership.stats()}
        if self.discovery is not None:
            out["discovery"] = {"sources": self.discovery.specs, "reads": self.discovery.rounds,
                                "retiring": sorted(self._retiring)}
        out["hedges"] = dict(self.hedging.counts)
        return out

    # ---- one request ----

    async def route(self, req: Any, finish: Finish,
                    timeout: float | None = None) -> tuple[list[Any], dict[str, int]]:
        """Serves req (its model resolved here) over the fleet.

        Finish's values in the caller's order, and the slowest sub-call's timings. Raises
        RoutedError."""
        if not req.items:  # as a server answers it
            raise RoutedError(_C.INVALID_ARGUMENT, "request has no items")
        if len(req.items) > MAX_ITEMS:  # as a server answers it, before any member works on it
            raise RoutedError(_C.INVALID_ARGUMENT, too_many_items(len(req.items)))
        await self._ready()
        r = self._request(req, finish, self.timeout if timeout is None else timeout)
        self.counts["requests"] += 1
        try:
            while r.pending or r.live:
                await self._step(r)
        except BaseException:
            self.counts["failed"] += 1  # (an error, a finish that raised, or its caller left)
            self._abandon(r)
            raise
        self.counts["items"] += len(r)
        return r.results, dict(r.timings)

    def _request(self, req: Any, finish: Finish, timeout: float | None) -> RoutedRequest:
        """The state of req's routing.

        Its keys (for its resolved model), its deadline, and how long its images may wait for their
        members (at most half the caller's time: the rest is for the sub-call itself)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be None or > 0 seconds, got {timeout!r}")
        now = asyncio.get_running_loop().time()
        name = req.model or self.membership.default_model
        lo = req.min_pixels if req.HasField("min_pixels") else None
        hi = req.max_pixels if req.HasField("max_pixels") else None
        patience = self.affinity_wait if timeout is None else min(self.affinity_wait,
                                                                  WAIT_SHARE * timeout)
        return RoutedRequest(
            req, name, [item_key(it, name, req.dtype, lo, hi) for it in req.items],
            weights=[item_weight(it) for it in req.items],
            finish=finish, local=req.shm_namespace == self.namespace,
            deadline=None if timeout is None else now + timeout, patient_until=now + patience)

    async def _step(self, r: RoutedRequest) -> None:
        """One round.

        Places r's pending items and starts their sub-calls, waits for a sub-call to end (or a
        member an item waits for to free a slot), and takes what ended."""
        loop = asyncio.get_running_loop()
        if r.pending and r.expired(loop.time()):
            # no time left to send them in: failed here, no member charged for it
            text, index = name_items("the request's deadline passed before it was sent to a "
                                     "member", r.pending)
            raise RoutedError(_C.DEADLINE_EXCEEDED, text, index)
        placed, waits_on = self._place(r, loop.time() < r.patient_until)
        r.pending = sorted(waits_on)  # item -> the member it waits for (holding it)
        freed: list[asyncio.Future] = []
        try:
            for m, (idx, epoch, probe) in placed.items():
                self._send(r, m, epoch, probe, idx)
            if waits_on:  # placed again when one of those members ends a call
                self.counts["waited"] += len(set(waits_on) - r.waited)
                r.waited.update(waits_on)
                freed = [asyncio.ensure_future(self.membership.members[t].freed.wait())
                         for t in set(waits_on.values())]
            until = [t for t in (r.patient_until if waits_on else None,
                                 self._hedge_due(r, loop.time())) if t is not None]
            done, _ = await asyncio.wait(
                {*r.live, *freed}, return_when=asyncio.FIRST_COMPLETED,
                timeout=max(0.0, min(until) - loop.time()) if until else None)
        finally:
            for f in freed:
                f.cancel()
            self._unwait(waits_on)  # (placed again next, or the request ended)
        for task in done.difference(freed):
            if task in r.live:  # (not a hedged pair's loser, dropped by its winner)
                self._ended(r, task, loop.time())
        r.pending.sort()

    def _send(self, r: RoutedRequest, m: Member, epoch: int, probe: bool,
              idx: list[int]) -> asyncio.Task:
        """Starts r's sub-call of items idx on m (its in-flight count already taken)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(self.calls.call(r, m, epoch, probe, idx))
        r.live[task] = (m, idx)
        r.started[task] = loop.time()
        self.hedging.started()
        return task

    def _hedge_due(self, r: RoutedRequest, now: float) -> float | None:
        """Hedges r's sub-calls that ran past their member's percentile (hedging.py).

        Each to the next usable member in its first item's rendezvous order that serves the model
        and none of its items failed on. Returns the loop time the next one falls due, if any."""
        nxt = None
        for task, (m, idx) in list(r.live.items()):
            if task in r.twins or task.done():
                continue
            delay = self.hedging.delay(m, r.model, len(idx))
            if delay is None:
                continue
            due = r.started[task] + delay
            if due > now:
                nxt = due if nxt is None else min(nxt, due)
                continue
            r.twins[task] = None  # considered once
            others = {x.target: x for x in self.membership.usable()
                      if x is not m and x.serves(r.model)
                      and not any(x.target in r.tried[i] for i in idx)}
            if not others or not self.hedging.allow(m):
                continue
            other = others[order(r.keys[idx[0]], others)[0]]
            other.probing = other.ejections > 0
            other.in_flight += r.weight(idx)
            hedge = self._send(r, other, other.epoch, other.probing, idx)
            r.twins[task], r.twins[hedge] = hedge, task
            r.hedges.add(hedge)
            self.hedging.counts["sent"] += 1
        return nxt

    def _pair_ended(self, r: RoutedRequest, task: asyncio.Task, ok: bool, retry: bool) -> bool:
        """The first of a hedged pair ended; True when its twin decides instead.

        An answer wins (the twin is cancelled, and what it answers anyway released); a retryable
        failure leaves it to the twin; any other failure fails the request as usual."""
        twin = r.twins.pop(task, None)
        if twin is None or twin not in r.live:
            return False
        r.twins.pop(twin, None)
        if ok:
            original = twin if task in r.hedges else task
            self.hedging.settled(r.live[original][0], task in r.hedges)
            r.live.pop(twin)
            r.started.pop(twin, None)
            if not twin.done():
                twin.cancel()
                self.calls.keep(twin)
            elif not twin.cancelled() and twin.exception() is None and r.local:
                status, value = twin.result()  # both answered at once: the other is unread
                if status == "ok":
                    self.discard(value[0])
            return False
        return retry

    def _ended(self, r: RoutedRequest, task: asyncio.Task, now: float) -> None:
        """Takes a finished sub-call.

        Its values, or its items back to pending after a retryable failure with time left; else the
        request fails (RoutedError)."""
        m, idx = r.live[task]
        status, value = task.result()
        if self._pair_ended(r, task, status == "ok", status != "ok" and value[2]):
            del r.live[task]
            for i in idx:  # its twin carries on; should it fail too, never back here
                r.tried[i].add(m.target)
            return
        del r.live[task]
        started = r.started.pop(task, now)
        if status == "ok":
            self.hedging.record(m, r.model, len(idx), now - started)
            r.accept(idx, *value)
            return
        code, details, retry = value
        text, index = renumber(details, idx)
        for i in idx:  # it may not have made them: not a holder any more
            self.affinity.forget(r.keys[i], m.target)
        if not retry or r.expired(now):
            if index is None:
                text, index = name_items(text, idx)
            raise RoutedError(code, text, index, code == _C.RESOURCE_EXHAUSTED and retry)
        r.retry(idx, m.target, (code, text))

    def _abandon(self, r: RoutedRequest) -> None:
        """A failed or cancelled request.

        Its other sub-calls stop, and what the finished ones made is released (nobody will read it).
        """
        r.answered_meanwhile()
        for task in r.live:
            if not task.done():
                task.cancel()
                self.calls.keep(task)
        if r.local:
            for resp in r.kept:
                self.discard(resp)

    def discard(self, resp: Any) -> None:
        """Unlinks the shm segments of an answer nobody will read.

        Its request failed, or its caller left. Only for a caller in our shm namespace
        (SubCalls.discard)."""
        self.calls.discard(resp)

    def _place(self, r: RoutedRequest, patient: bool = False,
               ) -> tuple[dict[Member, tuple[list[int], int, bool]], dict[int, str]]:
        """Chooses a member for each of r's pending items, under the load bound.

        A member serving the model, not one the item already failed on. With each member, its
        ejection epoch now (a failure counts only within it) and whether this call is its half-open
        probe; and, when ``patient``, the items that wait, each for a member holding its image that
        will free a slot soon (placement.choose), counted as waiting for it until the caller's
        ``_unwait``. Counts spills and retries only when every item was placed (a request that fails
        here sends nothing)."""
        model, pending, keys, tried, last = r.model, r.pending, r.keys, r.tried, r.last
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
            load[target] += r.weights[i]
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
            m.in_flight += r.weight(idx)
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

    async def close(self) -> None:
        """Removes every member and waits for the sub-calls abandoned before (cancelled)."""
        for task in (self._joining, self._watch, *self._retiring.values()):
            if task is not None:
                task.cancel()
        self.hedging.close()
        await self.membership.close()
        await self.calls.close()

    async def __aenter__(self: _F) -> _F:
        await self._ready()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

