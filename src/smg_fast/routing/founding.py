"""The founding of a fleet: the members given at start (the founders) are admitted together.

None is admitted until each has answered GetModelInfo (or failed to, or the join timeout
passed); then they are admitted in a deterministic order: first the config most of them agree
with, ties broken by their order in the list, so that replicated routers given one list agree
whichever member answers first. Each is checked against those admitted before it; one that does
not match is refused by its own join. Members that answer meanwhile (founders and later ones)
wait for the founding to end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .member import FingerprintMismatch, Member

# Admits a member with the GetModelInfo answer it gave (FingerprintMismatch when it differs).
Admit = Callable[[Member, Any], None]


class Founding:
    """The founders' admission, at most once at a time; open while it is being decided."""

    def __init__(self) -> None:
        self._done = asyncio.Event()  # cleared while the founders' admission is decided
        self._done.set()
        self._task: asyncio.Task | None = None

    @property
    def open(self) -> bool:
        """Whether the founders' admission is still being decided."""
        return not self._done.is_set()

    def start(self, founders: list[Member], timeout: float, admit: Admit,
              current: Callable[[Member], bool]) -> None:
        """Starts deciding the founders' admission.

        ``current(m)``: m is still a member (not removed meanwhile)."""
        if not founders:
            return
        self._done.clear()
        self._task = asyncio.get_running_loop().create_task(
            self._found(founders, timeout, admit, current))

    async def wait(self) -> None:
        """Returns once no founding is being decided."""
        await self._done.wait()

    async def offer(self, m: Member, info: Any) -> None:
        """A member answered while the founding is open.

        Its answer is the founding's to admit (or not); returns when the founding has ended."""
        m.offer = info
        m.answered.set()
        await self._done.wait()

    def cancel(self) -> None:
        """Stops a founding still being decided (the fleet closes)."""
        if self._task is not None:
            self._task.cancel()

    async def _found(self, founders: list[Member], timeout: float, admit: Admit,
                     current: Callable[[Member], bool]) -> None:
        try:
            waits = [asyncio.ensure_future(m.answered.wait()) for m in founders]
            try:
                await asyncio.wait(waits, timeout=timeout)
            finally:
                for w in waits:
                    w.cancel()
            offers = [m for m in founders if m.offer is not None and current(m)]
            for m in by_agreement(offers):
                try:
                    admit(m, m.offer)
                except FingerprintMismatch:
                    pass  # its own join refuses it (logged and counted there)
        finally:
            for m in founders:
                m.offer = None
            self._done.set()


def by_agreement(founders: list[Member]) -> list[Member]:
    """Founders (each with its offer) most agreed with first.

    By how many founders' configs agree with theirs (the same fingerprint and image limit for every
    model both serve), then list order."""
    fps = [{x.name: (x.config_fingerprint, x.max_image_pixels) for x in m.offer.models}
           for m in founders]

    def agree(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]]) -> bool:
        return all(b.get(name, fp) == fp for name, fp in a.items())

    support = [sum(agree(f, g) for g in fps) for f in fps]
    return [founders[i] for i in sorted(range(len(founders)), key=lambda i: (-support[i], i))]
