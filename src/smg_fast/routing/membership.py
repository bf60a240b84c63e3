"""The fleet's members.

Joining and leaving, admission (GetModelInfo, fingerprint check), and what the fleet serves.

Asyncio only: one task per member joins it, follows its health (health.py: a draining server
turns NOT_SERVING on its Watch stream; a dead one breaks it) and rejoins after a reconnect. A
member is refused when a model it serves has a different config fingerprint from the fleet's:
the same image must give the same bytes wherever it lands. The fleet's fingerprints are those
of the members admitted now (they agree: each was checked against the others). The members
given at start (the founders) are admitted together (founding.py). Later members are checked
against what is admitted then, so that config holds until its last member leaves; a refused
member asks again every ``REFUSED_RETRY_S`` and at once when a member leaves, and is admitted
when it matches what is admitted then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc

from .._proto import preprocessor_pb2 as pb
from .._proto import preprocessor_pb2_grpc as pb_grpc
from .founding import Founding
from .health import Ejection, follow
from .log_budget import LogBudget
from .member import FingerprintMismatch, Member
from .self_check import SELF_DETAIL, join_metadata

log = logging.getLogger("smg_fast.routing")

JOIN_TIMEOUT_S = 5.0
RECONNECT_MAX_S = 1.0  # a member that is down is asked again at least this often
REFUSED_RETRY_S = 5.0


class Membership:
    """Members by target, in the order given (the list, then add()).

    ``ejection`` (health.Ejection) ejects a member after ``eject_after`` consecutive transport
    failures; ``probe_s``: the liveness Check interval of health.follow (0: none)."""

    def __init__(self, *, channel_options: list[tuple[str, int]], eject_after: int = 3,
                 eject_base_s: float = 1.0, eject_max_s: float = 60.0,
                 probe_s: float = 0.0) -> None:
        self.options = channel_options
        self.probe_s = probe_s
        self.ejection = Ejection(eject_after, eject_base_s, eject_max_s)
        self.founding = Founding()
        self.members: dict[str, Member] = {}  # in the order given (the list, then add())
        self._left = asyncio.Event()  # set (and replaced) when an admitted member leaves
        # Every model an admitted member ever served: a request for one whose members are all
        # down for now is UNAVAILABLE (retry later), not an unknown model.
        self.known_models: set[str] = set()
        self.refused = 0
        self._log = LogBudget(log)  # per-member lines: a burst, then counted
        self.on_down: Callable[[Member], None] | None = None  # a member went down (discovery)
        self.on_removed: Callable[[Member], None] | None = None  # its state elsewhere may go

    # ---- joining and leaving ----

    def found(self, targets: list[str], timeout: float) -> list[Member]:
        """Starts joining the members given at start (the founders).

        The founding (founding.py) admits them together once each answered or timeout passed.
        Members added meanwhile wait."""
        founders = [self.add(t) for t in dict.fromkeys(targets)]
        self.founding.start(founders, timeout, self._admit,
                            lambda m: self.members.get(m.target) is m)
        return founders

    async def founded(self) -> None:
        """Returns once the founders' admission is decided."""
        await self.founding.wait()

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

    async def remove(self, target: str) -> None:
        """Takes target out of the fleet (its calls in flight fail over); on_removed is told."""
        m = self.members.pop(target, None)
        if m is None:
            return
        m.removed = True
        if self.on_removed is not None:
            self.on_removed(m)
        self._set_state(m, "down")
        m.answered.set()  # the founding waits for it no longer
        if m.task is not None:
            m.task.cancel()
            await asyncio.wait([m.task])
        self._leave(m)
        await m.channel.close()

    def _leave(self, m: Member) -> None:
        """m is no longer admitted.

        The fleet's fingerprints are the others' now, so refused members ask again."""
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
        """Model name -> the admitted members' max_image_pixels (0: none).

        Not part of the fingerprint (a limit never changes an output), but the same image must pass
        or fail the same wherever it lands, so it is checked on admission like the fingerprint."""
        return {x.name: x.max_image_pixels for m in self.members.values()
                if m.info is not None for x in m.info.models}

    def model_names(self) -> list[str]:
        """The models the admitted members serve."""
        return sorted(self.fingerprints)

    @property
    def default_model(self) -> str:
        """The model of a request that names none.

        The default of the first member, in the order given (the list, then add()), that was
        admitted; a member that is down keeps its place (the requests wait for it: UNAVAILABLE,
        never another model's output), one removed or refused since loses it. Routers given one list
        agree."""
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
        """Removes every member (a founding still being decided ends)."""
        self.founding.cancel()
        for target in list(self.members):
            await self.remove(target)

    def _admit(self, m: Member, info: Any) -> None:
        """Checks the member's fingerprints against the fleet's, then admits it.

        The fleet's are the admitted members'. Once admitted, its models are the fleet's too."""
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
        backoff = 0.05
        while True:
            try:
                if m.info is None:
                    info = await m.stub.GetModelInfo(pb.GetModelInfoRequest(),
                                                     timeout=JOIN_TIMEOUT_S,
                                                     metadata=join_metadata())
                    if self.founding.open:  # the founding admits founders together
                        await self.founding.offer(m, info)
                    try:
                        if m.info is None:  # (not a founder the founding admitted)
                            self._admit(m, info)
                    except FingerprintMismatch as exc:
                        await self._refuse(m, exc)
                        continue  # ask again: the fleet's fingerprints may have changed
                await follow(m, self.probe_s, self._set_state)
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as exc:
                if (exc.code() == grpc.StatusCode.FAILED_PRECONDITION
                        and SELF_DETAIL in (exc.details() or "")):
                    m.answered.set()  # the founding waits for it no longer
                    await self._refuse(m, f"member {m.target}: {SELF_DETAIL} (a discovery "
                                          "record names the router): never routed to")
                    continue
                self._log.log(logging.INFO, "member %s: %s; asking again in %.2f s", m.target,
                              exc.code().name, backoff)
            except Exception:  # keep following the member whatever broke
                log.exception("member %s: health follower failed", m.target)
            self._set_state(m, "down")
            self._leave(m)  # whatever answers at this address next is checked again on rejoin
            m.answered.set()
            m.joined.set()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECONNECT_MAX_S)

    async def _refuse(self, m: Member, exc: FingerprintMismatch | str) -> None:
        """Marks m refused, then waits until it may ask again.

        A refusal is counted once, not per asking. The wait lasts until an admitted member leaves or
        REFUSED_RETRY_S passes (m may have restarted meanwhile)."""
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

    def _set_state(self, m: Member, state: str) -> None:
        if state != "serving":
            m.probing = False  # a probe's verdict, if it comes, no longer decides anything
        if state in ("down", "refused"):
            m.lost.set()  # calls in flight there stop waiting and retry elsewhere
        elif m.lost.is_set():
            m.lost = asyncio.Event()  # a draining member still finishes what it has
        if state != m.state:
            self._log.log(logging.INFO, "member %s: %s", m.target, state)
            if state == "down" and self.on_down is not None and self.members.get(m.target) is m:
                self.on_down(m)
        m.state = state
        m.changed.set()  # wakes add()s waiting for this member
        m.changed = asyncio.Event()

    # ---- views ----

    def usable(self) -> list[Member]:
        now = time.monotonic()
        return [m for m in self.members.values() if m.usable(now)]

    def info(self, version: str, max_message_bytes: int) -> Any:
        """GetModelInfo for the fleet.

        Every model an admitted member serves (a Preprocess for it is routed; each described as the
        first member in list order that serves it), and the default model a Preprocess that names
        none gets (default_model); what must hold everywhere as the strictest serving member's
        value; what they share as theirs, else empty. None when no member serves."""
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
        """Per member.

        Its health state; ``ejected`` while ejection keeps it out (its span, or a half-open probe in
        flight); ``usable`` whether a request may be placed on it now."""
        now = time.monotonic()
        return {
            "refused": self.refused, "ejections": self.ejection.ejected,
            "members": {t: {"state": m.state, "in_flight": m.in_flight,
                            "ejected": now < m.ejected_until or bool(m.ejections and m.probing),
                            "usable": m.usable(now), "items": dict(m.items)}
                        for t, m in self.members.items()}}
