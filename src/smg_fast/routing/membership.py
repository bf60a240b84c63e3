"""The fleet's members: joining (GetModelInfo, fingerprint check), health (grpc.health.v1
Watch), passive ejection after transport failures, and in-flight counts for the load bound.

Asyncio only: one task per member keeps its Watch stream open (a draining server turns
NOT_SERVING on it; a dead one breaks it) and rejoins after a reconnect. A member is refused
when a model it serves has a different config fingerprint from the fleet's: the same image must
give the same bytes wherever it lands. The fleet's fingerprints are those of the members
admitted now (they agree: each was checked against the others). The members given at start
(the founders) are admitted together, once each has answered (or failed to, or the join timeout
passed), in a deterministic order: first the config most of them agree with, ties broken by
their order in the list, so that replicated routers given one list agree whichever member
answers first. Later members are checked against what is admitted then, so that config holds
until its last member leaves; a refused member asks again every ``REFUSED_RETRY_S`` and at once
when a member leaves, and is admitted when it matches what is admitted then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .._proto import preprocessor_pb2 as pb
from .._proto import preprocessor_pb2_grpc as pb_grpc

log = logging.getLogger("smg_fast.routing")

_SERVING = health_pb2.HealthCheckResponse.SERVING
JOIN_TIMEOUT_S = 5.0
RECONNECT_MAX_S = 2.0
REFUSED_RETRY_S = 5.0


class FingerprintMismatch(ValueError):
    """A member's processor config for a model differs from the fleet's."""


@dataclass(eq=False)  # members are identities (dict keys), not values
class Member:
    target: str
    channel: Any
    stub: Any
    info: Any = None  # GetModelInfoResponse while admitted
    last_info: Any = None  # the one it was last admitted with, kept while down (default_model)
    offer: Any = None  # a founder's answer, until the founding admits or refuses it
    joins: int = 0  # admissions so far: after a rejoin its cache may be empty (placement.Affinity)
    state: str = "joining"  # joining | serving | not_serving | down | refused
    in_flight: int = 0
    failures: int = 0  # consecutive transport failures
    ejections: int = 0  # consecutive ejections (the next lasts twice as long)
    epoch: int = 0  # ejections so far: a call's failure counts only in the epoch it began in
    ejected_until: float = 0.0
    probing: bool = False  # half-open: one request in flight decides
    items: dict[str, int] = field(default_factory=dict)  # outcome -> items
    joined: asyncio.Event = field(default_factory=asyncio.Event)  # first join attempt done
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # first GetModelInfo ended
    lost: asyncio.Event = field(default_factory=asyncio.Event)  # set when it stops serving
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) per state
    freed: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) per call end
    task: asyncio.Task | None = None
    health: Any = None  # its grpc.health.v1 stub

    def usable(self, now: float) -> bool:
        if self.state != "serving" or now < self.ejected_until:
            return False
        return not (self.ejections and self.probing)  # half-open: one probe at a time

    def serves(self, model: str) -> bool:
        return self.info is not None and any(x.name == model for x in self.info.models)


class Membership:
    """Members by target. ``eject_after`` consecutive transport failures eject a member for
    ``eject_base_s`` x 2^(n-1) (at most ``eject_max_s``); then one request probes it."""

    def __init__(self, *, channel_options: list[tuple[str, int]], eject_after: int = 3,
                 eject_base_s: float = 1.0, eject_max_s: float = 60.0,
                 probe_s: float = 0.0) -> None:
        self.options = channel_options
        self.probe_s = probe_s
        self.eject_after = eject_after
        self.eject_base_s = eject_base_s
        self.eject_max_s = eject_max_s
        self.members: dict[str, Member] = {}  # in the order given (the list, then add())
        self._founded = asyncio.Event()  # cleared while the founders' admission is decided
        self._founded.set()
        self._founding: asyncio.Task | None = None
        self._left = asyncio.Event()  # set (and replaced) when an admitted member leaves
        # Every model an admitted member ever served: a request for one whose members are all
        # down for now is UNAVAILABLE (retry later), not an unknown model.
        self.known_models: set[str] = set()
        self.refused = 0
        self.ejected = 0

    # ---- joining and leaving ----

    def add(self, target: str) -> Member:
        """Starts joining target (idempotent); await ``member.joined`` for the first attempt."""
        if target in self.members:
            return self.members[target]
        channel = grpc.aio.insecure_channel(target, options=self.options)
        m = Member(target, channel, pb_grpc.PreprocessorStub(channel),
                   health=health_pb2_grpc.HealthStub(channel))
        self.members[target] = m
        m.task = asyncio.get_running_loop().create_task(self._run(m))
        return m

    def found(self, targets: list[str], timeout: float) -> list[Member]:
        """Starts joining the members given at start (the founders); none is admitted until
        each has answered GetModelInfo (or failed to) or timeout passed. Then they are
        admitted in the order of how many founders' configs agree with theirs, ties by their
        order in targets, each checked against those admitted before it: the config most of
        them share is the fleet's, whichever answered first. Members added meanwhile wait."""
        founders = [self.add(t) for t in dict.fromkeys(targets)]
        if founders:
            self._founded.clear()
            self._founding = asyncio.get_running_loop().create_task(
                self._found(founders, timeout))
        return founders

    async def founded(self) -> None:
        await self._founded.wait()

    async def _found(self, founders: list[Member], timeout: float) -> None:
        try:
            waits = [asyncio.ensure_future(m.answered.wait()) for m in founders]
            try:
                await asyncio.wait(waits, timeout=timeout)
            finally:
                for w in waits:
                    w.cancel()
            offers = [m for m in founders if m.offer is not None
                      and self.members.get(m.target) is m]
            for m in _by_agreement(offers):
                try:
                    self._admit(m, m.offer)
                except FingerprintMismatch:
                    pass  # its own join refuses it (logged and counted there)
        finally:
            for m in founders:
                m.offer = None
            self._founded.set()

    async def remove(self, target: str) -> None:
        m = self.members.pop(target, None)
        if m is None:
            return
        self._set_state(m, "down")
        m.answered.set()  # the founding waits for it no longer
        if m.task is not None:
            m.task.cancel()
            await asyncio.wait([m.task])
        self._leave(m)
        await m.channel.close()

    def _leave(self, m: Member) -> None:
        """m is no longer admitted: the fleet's fingerprints are the others' now, so refused
        members ask again."""
        if m.info is not None:
            m.info = None
            self._left.set()
            self._left = asyncio.Event()

    @property
    def fingerprints(self) -> dict[str, str]:
        """Model name -> the fleet's config fingerprint: the admitted members'."""
        return {x.name: x.config_fingerprint for m in self.members.values()
                if m.info is not None for x in m.info.models}

    @property
    def image_limits(self) -> dict[str, int]:
        """Model name -> the admitted members' max_image_pixels (0: none). Not part of the
        fingerprint (a limit never changes an output), but the same image must pass or fail
        the same wherever it lands, so it is checked on admission like the fingerprint."""
        return {x.name: x.max_image_pixels for m in self.members.values()
                if m.info is not None for x in m.info.models}

    def model_names(self) -> list[str]:
        """The models the admitted members serve."""
        return sorted(self.fingerprints)

    @property
    def default_model(self) -> str:
        """The model of a request that names none: the default of the first member, in the
        order given (the list, then add()), that was admitted; a member that is down keeps its
        place (the requests wait for it: UNAVAILABLE, never another model's output), one
        removed or refused since loses it. Routers given one list agree."""
        for m in self.members.values():
            if m.last_info is not None:
                return m.last_info.default_model
        return ""

    async def settled(self, m: Member, timeout: float) -> bool:
        """Waits (at most timeout) until m serves (True) or is refused or removed (False)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while m.state not in ("serving", "refused") and self.members.get(m.target) is m:
            changed = m.changed
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, end - loop.time()))
            except asyncio.TimeoutError:
                return False
        return m.state == "serving" and self.members.get(m.target) is m

    async def close(self) -> None:
        if self._founding is not None:
            self._founding.cancel()
        for target in list(self.members):
            await self.remove(target)

    def _admit(self, m: Member, info: Any) -> None:
        """Checks the member's fingerprints against the fleet's (the admitted members'), then
        admits it: its models are the fleet's too from now on."""
        fleet = self.fingerprints
        limits = self.image_limits
        for model in info.models:
            want = fleet.get(model.name)
            if want is not None and want != model.config_fingerprint:
                raise FingerprintMismatch(
                    f"{m.target}: model {model.name!r} has config fingerprint "
                    f"{model.config_fingerprint}, the fleet's is {want}")
            limit = limits.get(model.name)
            if limit is not None and limit != model.max_image_pixels:
                raise FingerprintMismatch(
                    f"{m.target}: model {model.name!r} rejects images over "
                    f"{model.max_image_pixels or 'no limit of'} pixels, the fleet's limit is "
                    f"{limit or 'none'}: an image would pass or fail by where it lands")
        versions = {x.info.version for x in self.members.values() if x.info is not None}
        if versions and info.version not in versions:  # allowed (the fingerprints decide)
            log.warning("member %s runs smg-fast %s, the fleet's other members %s", m.target,
                        info.version or "?", ", ".join(sorted(versions)))
        m.info = m.last_info = info
        m.joins += 1
        self.known_models.update(x.name for x in info.models)

    async def _run(self, m: Member) -> None:
        """Joins, then follows the member's health until removed; reconnects with backoff."""
        health = m.health
        backoff = 0.05
        while True:
            try:
                if m.info is None:
                    info = await m.stub.GetModelInfo(pb.GetModelInfoRequest(),
                                                     timeout=JOIN_TIMEOUT_S)
                    if not self._founded.is_set():  # the founding admits founders together
                        m.offer = info
                        m.answered.set()
                        await self._founded.wait()
                    try:
                        if m.info is None:  # (not a founder the founding admitted)
                            self._admit(m, info)
                    except FingerprintMismatch as exc:
                        await self._refuse(m, exc)
                        continue  # ask again: the fleet's fingerprints may have changed
                await self._follow(m, health)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                log.debug("member %s: %s", m.target, exc.code().name)
            except Exception:  # keep following the member whatever broke
                log.exception("member %s: health follower failed", m.target)
            self._set_state(m, "down")
            self._leave(m)  # whatever answers at this address next is checked again on rejoin
            m.answered.set()
            m.joined.set()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECONNECT_MAX_S)

    async def _refuse(self, m: Member, exc: FingerprintMismatch) -> None:
        """Marks m refused (counted once per refusal, not per asking), then waits until an
        admitted member leaves or REFUSED_RETRY_S passes (m may have restarted meanwhile)."""
        m.last_info = None  # its config is not the fleet's: it no longer names the default
        if m.state != "refused":
            log.error("refusing member: %s", exc)
            self.refused += 1
            self._set_state(m, "refused")
        m.joined.set()
        left = asyncio.ensure_future(self._left.wait())
        try:  # (not wait_for: on 3.11 it loses a cancel that meets the event being set)
            await asyncio.wait([left], timeout=REFUSED_RETRY_S)
        finally:
            left.cancel()

    async def _follow(self, m: Member, health: Any) -> None:
        """Follows the Watch stream until it ends, or until a liveness Check goes unanswered
        for probe_s (a hung process keeps its connection and its stream open: only asking
        finds it; gRPC's own keepalive pings did not, in our tests with grpcio 1.85)."""
        call = health.Watch(health_pb2.HealthCheckRequest(service=""))

        async def watch() -> None:
            async for resp in call:
                serving = resp.status == _SERVING
                self._set_state(m, "serving" if serving else "not_serving")
                m.joined.set()

        async def probe() -> None:
            while True:
                await asyncio.sleep(self.probe_s)
                try:
                    await health.Check(health_pb2.HealthCheckRequest(service=""),
                                       timeout=self.probe_s)
                except grpc.aio.AioRpcError as exc:
                    log.warning("member %s: no answer to a health check (%s): down",
                                m.target, exc.code().name)
                    return

        tasks = [asyncio.ensure_future(watch())]
        if self.probe_s:
            tasks.append(asyncio.ensure_future(probe()))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            call.cancel()
        if tasks[0].done() and not tasks[0].cancelled() and tasks[0].exception() is not None:
            raise tasks[0].exception()  # type: ignore[misc]

    def _set_state(self, m: Member, state: str) -> None:
        if state != "serving":
            m.probing = False  # a probe's verdict, if it comes, no longer decides anything
        if state in ("down", "refused"):
            m.lost.set()  # calls in flight there stop waiting and retry elsewhere
        elif m.lost.is_set():
            m.lost = asyncio.Event()  # a draining member still finishes what it has
        if state != m.state:
            log.info("member %s: %s", m.target, state)
        m.state = state
        m.changed.set()  # wakes add()s waiting for this member
        m.changed = asyncio.Event()

    # ---- passive ejection ----

    def success(self, m: Member) -> None:
        m.failures = 0
        m.ejections = 0
        m.probing = False

    def failure(self, m: Member, epoch: int) -> None:
        """One transport failure of a call that began in ``epoch``; ejects at the threshold, or
        at once when it was a probe. Calls that began before the last ejection do not count:
        one crash fails every call in flight at once, and that is one ejection, not several
        (each doubling the next one's length)."""
        if epoch != m.epoch:
            return
        m.failures += 1
        half_open = m.ejections > 0
        m.probing = False
        if half_open or m.failures >= self.eject_after:
            m.ejections += 1
            m.epoch += 1
            m.failures = 0
            span = min(self.eject_max_s, self.eject_base_s * 2 ** (m.ejections - 1))
            m.ejected_until = time.monotonic() + span
            self.ejected += 1
            log.warning("member %s: ejected for %.1f s", m.target, span)

    async def verify(self, m: Member, epoch: int, timeout: float) -> None:
        """A sub-call on m ran past its attempt timeout. That alone says nothing of m: another
        tenant's slow valid images do it to a healthy member. It counts as a transport failure
        (toward ejection) only when m does not answer a health Check within timeout either."""
        if m.health is None:
            return
        try:
            await m.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            log.warning("member %s: a sub-call timed out and a health check got %s",
                        m.target, exc.code().name)
            self.failure(m, epoch)

    # ---- views ----

    def usable(self) -> list[Member]:
        now = time.monotonic()
        return [m for m in self.members.values() if m.usable(now)]

    def info(self, version: str, max_message_bytes: int) -> Any:
        """GetModelInfo for the fleet: every model an admitted member serves (a Preprocess for
        it is routed; each described as the first member in list order that serves it), and
        the default model a Preprocess that names none gets (default_model); what must hold
        everywhere as the strictest serving member's value; what they share as theirs, else
        empty. None when no member serves."""
        infos = [m.info for m in self.members.values() if m.state == "serving" and m.info]
        if not infos:
            return None
        models: dict[str, Any] = {}
        for m in self.members.values():
            for x in m.info.models if m.info is not None else ():
                models.setdefault(x.name, x)
        out = pb.GetModelInfoResponse(
            models=list(models.values()), default_model=self.default_model,
            version=version,
            max_message_bytes=min([max_message_bytes, *(i.max_message_bytes for i in infos)]),
            shm_min_bytes=max(i.shm_min_bytes for i in infos),
            pixel_cache_bytes=sum(i.pixel_cache_bytes for i in infos),
            rdma_available=all(i.rdma_available for i in infos))
        if out.rdma_available:
            out.rdma_max_bytes = min(i.rdma_max_bytes for i in infos)
        if len({i.shm_namespace for i in infos}) == 1:  # one host: shm works as with a server
            out.shm_namespace = infos[0].shm_namespace
        if len({i.default_transport for i in infos}) == 1:
            out.default_transport = infos[0].default_transport
        return out

    def stats(self) -> dict[str, Any]:
        """Per member: its health state; ``ejected`` while ejection keeps it out (its span, or
        a half-open probe in flight); ``usable`` whether a request may be placed on it now."""
        now = time.monotonic()
        return {
            "refused": self.refused, "ejections": self.ejected,
            "members": {t: {"state": m.state, "in_flight": m.in_flight,
                            "ejected": now < m.ejected_until or bool(m.ejections and m.probing),
                            "usable": m.usable(now), "items": dict(m.items)}
                        for t, m in self.members.items()}}


def _by_agreement(founders: list[Member]) -> list[Member]:
    """Founders (each with its offer) most agreed with first: by how many founders' configs
    agree with theirs (the same fingerprint and image limit for every model both serve), then
    list order."""
    fps = [{x.name: (x.config_fingerprint, x.max_image_pixels) for x in m.offer.models}
           for m in founders]

    def agree(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]]) -> bool:
        return all(b.get(name, fp) == fp for name, fp in a.items())

    support = [sum(agree(f, g) for g in fps) for f in fps]
    return [founders[i] for i in sorted(range(len(founders)), key=lambda i: (-support[i], i))]
