"""One routed request's state, from the caller's message to its reassembled results.

Its items' keys, where each item was tried and how it last failed, the sub-calls in flight, the
answers kept so far, its deadline, and how long its images may wait for a member that holds them."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from .member import Member
from .messages import sub_request, without_items

TIMINGS = ("queue_us", "decode_us", "preprocess_us", "transport_us", "total_us")
# What a member's response becomes for the caller: one value per item, in the sub-call's order.
Finish = Callable[[Member, Any], Awaitable[list[Any]]]
# How an item last failed: the status and its details (item indices already the caller's).
Failure = tuple[grpc.StatusCode, str]


class RoutedRequest:
    """The state of one request the fleet routes (``Fleet.route`` makes one per call).

    ``pending``: items still to place (sorted); ``live``: sub-calls in flight, each with its
    member and items; ``tried`` / ``last``: per item, the members it failed on (retryably) and
    its last failure; ``kept``: the members' answers whose values are in ``results``.
    ``deadline`` and ``patient_until`` are event loop times (None: no deadline)."""

    def __init__(self, req: Any, model: str, keys: list[bytes], *, finish: Finish | None = None,
                 local: bool = False, deadline: float | None = None,
                 patient_until: float = 0.0, weights: list[int] | None = None) -> None:
        n = len(keys)
        self.req = req
        self.model = model  # resolved: never "" once the fleet knows a default
        self.keys = keys
        self.weights = weights if weights is not None else [1] * n  # each item's load
        self.finish = finish
        self.local = local  # the caller's shm segments are in our /dev/shm
        self.template = without_items(req, model)
        self.deadline = deadline
        self.patient_until = patient_until
        self.results: list[Any] = [None] * n
        self.kept: list[Any] = []
        self.tried: list[set[str]] = [set() for _ in range(n)]
        self.last: list[Failure | None] = [None] * n
        self.timings: Counter[str] = Counter()
        self.pending = list(range(n))
        self.live: dict[asyncio.Task, tuple[Member, list[int]]] = {}
        self.waited: set[int] = set()  # items counted as having waited in the fleet
        self.started: dict[asyncio.Task, float] = {}  # sub-call -> loop time it was sent
        # a hedged sub-call and its hedge, each to the other (None: considered, not hedged)
        self.twins: dict[asyncio.Task, asyncio.Task | None] = {}
        self.hedges: set[asyncio.Task] = set()  # the hedges among them

    def __len__(self) -> int:
        return len(self.keys)

    def weight(self, idx: list[int]) -> int:
        """The load items idx count for in their member's in-flight total."""
        return sum(self.weights[i] for i in idx)

    def expired(self, now: float) -> bool:
        """Whether the deadline has passed at loop time now."""
        return self.deadline is not None and now >= self.deadline

    def time_left(self, now: float) -> float | None:
        """Seconds to the deadline (0 once passed); None without one."""
        return None if self.deadline is None else max(0.0, self.deadline - now)

    def sub_request(self, idx: list[int]) -> Any:
        """The sub-request of items idx for one member."""
        return sub_request(self.template, self.req, idx)

    def accept(self, idx: list[int], resp: Any, values: list[Any]) -> None:
        """A member's answer for items idx.

        Their values, kept with the answer's slowest timings (the sub-calls ran side by side)."""
        self.kept.append(resp)
        for i, v in zip(idx, values, strict=True):
            self.results[i] = v
        for k in TIMINGS:
            self.timings[k] = max(self.timings[k], getattr(resp.timings, k))

    def retry(self, idx: list[int], target: str, failure: Failure) -> None:
        """Items idx failed retryably on target: placed again, never on target."""
        for i in idx:
            self.tried[i].add(target)
            self.last[i] = failure
        self.pending.extend(idx)

    def answered_meanwhile(self) -> None:
        """Keeps the answers of sub-calls that succeeded in the moment the request failed.

        Their handles are released with the rest."""
        for task in self.live:
            if task.done() and not task.cancelled() and task.exception() is None:
                status, value = task.result()
                if status == "ok":
                    self.kept.append(value[0])
