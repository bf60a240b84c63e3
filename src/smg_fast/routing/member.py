"""A member of a fleet.

One smg-fast server as the fleet sees it (its channel, what it serves, its health state, its
ejection, its load), and the refusal of one whose config is not the fleet's."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


class FingerprintMismatch(ValueError):
    """A member's processor config for a model differs from the fleet's."""


@dataclass(eq=False)  # members are identities (dict keys), not values
class Member:
    """One member; its fields are the membership's and the fleet's to change."""

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
    retiring: bool = False  # its source dropped it: no new work, removed once its calls end
    suspected: bool = False  # its hedges kept winning: no new work until a health probe answers
    removed: bool = False  # out of the fleet (membership.remove): what ends late is not kept
    items: dict[str, int] = field(default_factory=dict)  # outcome -> items
    joined: asyncio.Event = field(default_factory=asyncio.Event)  # first join attempt done
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # first GetModelInfo ended
    lost: asyncio.Event = field(default_factory=asyncio.Event)  # set when it stops serving
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) per state
    freed: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) per call end
    task: asyncio.Task | None = None
    health: Any = None  # its grpc.health.v1 stub

    def usable(self, now: float) -> bool:
        """Whether a request may be placed on it at time.monotonic() now."""
        if self.state != "serving" or now < self.ejected_until or self.retiring \
                or self.suspected:
            return False
        return not (self.ejections and self.probing)  # half-open: one probe at a time

    def serves(self, model: str) -> bool:
        """Whether it is admitted and serves model."""
        return self.info is not None and any(x.name == model for x in self.info.models)
