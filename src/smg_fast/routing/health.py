"""A member's health.

Its grpc.health.v1 Watch stream and liveness checks (``follow``), and passive ejection after
consecutive transport failures (``Ejection``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2

from .member import Member

log = logging.getLogger("smg_fast.routing")

_SERVING = health_pb2.HealthCheckResponse.SERVING


async def follow(m: Member, probe_s: float, set_state: Callable[[Member, str], None]) -> None:
    """Follows m's Watch stream until it ends or a liveness Check goes unanswered.

    probe_s: how long a Check may go unanswered (0: no Check).

    The stream's answers set m's state (serving or not_serving). A hung process keeps its
    connection and its stream open: only asking finds it; gRPC's own keepalive pings did not,
    in our tests with grpcio 1.85."""
    health = m.health
    call = health.Watch(health_pb2.HealthCheckRequest(service=""))

    async def watch() -> None:
        async for resp in call:
            set_state(m, "serving" if resp.status == _SERVING else "not_serving")
            m.joined.set()

    async def probe() -> None:
        while True:
            await asyncio.sleep(probe_s)
            try:
                await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=probe_s)
            except grpc.aio.AioRpcError as exc:
                log.warning("member %s: no answer to a health check (%s): down",
                            m.target, exc.code().name)
                return

    tasks = [asyncio.ensure_future(watch())]
    if probe_s:
        tasks.append(asyncio.ensure_future(probe()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        call.cancel()
    if tasks[0].done() and not tasks[0].cancelled() and tasks[0].exception() is not None:
        raise tasks[0].exception()  # type: ignore[misc]


class Ejection:
    """Passive ejection.

    ``eject_after`` consecutive transport failures eject a member for ``eject_base_s`` x 2^(n-1) (at
    most ``eject_max_s``); then one request probes it (half-open) and its outcome decides."""

    def __init__(self, eject_after: int = 3, eject_base_s: float = 1.0,
                 eject_max_s: float = 60.0) -> None:
        self.eject_after = eject_after
        self.eject_base_s = eject_base_s
        self.eject_max_s = eject_max_s
        self.ejected = 0  # ejections so far, every member

    def success(self, m: Member) -> None:
        """m answered: its failures and ejections start again from zero."""
        m.failures = 0
        m.ejections = 0
        m.probing = False

    def failure(self, m: Member, epoch: int) -> None:
        """One transport failure of a call that began in ``epoch``.

        Ejects at the threshold, or at once when it was a probe.

        Calls that began before the last ejection do not count: one crash fails every call in
        flight at once, and that is one ejection, not several (each doubling the next one's
        length)."""
        if epoch != m.epoch:
            return
        m.failures += 1
        half_open = m.ejections > 0
        m.probing = False
        if half_open or m.failures >= self.eject_after:
            self.eject(m, epoch)

    def eject(self, m: Member, epoch: int) -> None:
        """Ejects m now (unless an ejection since ``epoch`` already did)."""
        if epoch != m.epoch:
            return
        m.ejections += 1
        m.epoch += 1
        m.failures = 0
        m.probing = False
        span = min(self.eject_max_s, self.eject_base_s * 2 ** (m.ejections - 1))
        m.ejected_until = time.monotonic() + span
        self.ejected += 1
        log.warning("member %s: ejected for %.1f s", m.target, span)

    async def verify(self, m: Member, epoch: int, timeout: float) -> None:
        """A sub-call on m ran past its attempt timeout: a failure only if m is silent too.

        That alone says nothing of m: another tenant's slow valid images do it to a healthy
        member. It counts as a transport failure (toward ejection) only when m does not answer
        a health Check within timeout either."""
        if m.health is None:
            return
        try:
            await m.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            log.warning("member %s: a sub-call timed out and a health check got %s",
                        m.target, exc.code().name)
            self.failure(m, epoch)
