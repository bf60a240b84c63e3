"""How a fleet follows its sources of members (discovery.py): the founders, joins and retirements.

A mixin of dispatch.Fleet: the members the sources name at start found the fleet; later ones join
(the usual checks); one no longer named takes no new work and is removed once its calls in flight
ended (at most RETIRE_MAX_S)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .discovery import Discovery
from .member import Member
from .membership import Membership

log = logging.getLogger("smg_fast.routing")

RETIRE_MAX_S = 60.0  # the longest a member its source dropped keeps its calls before removal


class FollowsSources:
    """The discovery part of a fleet (its membership, join timeout and founders' join)."""

    membership: Membership
    discovery: Discovery | None
    join_timeout: float
    _watch: asyncio.Task | None
    _retiring: dict[str, asyncio.Task]

    async def _join(self, founders: list[Member]) -> Any:
        raise NotImplementedError

    async def _discover_and_join(self) -> None:
        """Reads the sources once (at most join_timeout), those members found the fleet.

        Then it follows the sources."""
        assert self.discovery is not None
        try:
            first = await asyncio.wait_for(self.discovery.read(), self.join_timeout)
        except asyncio.TimeoutError:
            first = []
        founders = self.membership.found(first, self.join_timeout)
        self._watch = asyncio.get_running_loop().create_task(self.discovery.run(first))
        if founders:
            await self._join(founders)

    async def _discovered(self, joined: list[str], left: list[str]) -> None:
        """The sources name new members (they join) and no longer name others (they retire)."""
        loop = asyncio.get_running_loop()
        for t in joined:
            task = self._retiring.pop(t, None)
            if task is not None:
                task.cancel()
            m = self.membership.members.get(t)
            if m is not None:
                m.retiring = False
            else:
                self.membership.add(t)
        for t in left:
            m = self.membership.members.get(t)
            if m is not None and t not in self._retiring:
                m.retiring = True
                self._retiring[t] = loop.create_task(self._retire(m))

    async def _retire(self, m: Member) -> None:
        """Removes m once its calls in flight ended (no new ones are placed on it)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + RETIRE_MAX_S
        if m.in_flight:
            log.info("member %s: left its source; removed once its %d item(s) in flight end",
                     m.target, m.in_flight)
        try:
            while m.in_flight > 0 and loop.time() < end:
                freed = asyncio.ensure_future(m.freed.wait())
                try:
                    await asyncio.wait([freed], timeout=end - loop.time())
                finally:
                    freed.cancel()
            if m.retiring and self.membership.members.get(m.target) is m:
                log.info("member %s: removed (no longer named by its source)", m.target)
                await self.membership.remove(m.target)
        finally:
            if self._retiring.get(m.target) is asyncio.current_task():
                del self._retiring[m.target]

