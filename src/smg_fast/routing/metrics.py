"""Prometheus metrics of a fleet, read from ``Fleet.stats()`` at scrape time.

The library's stats() and the router's /metrics therefore always say the same.

A gateway that embeds AsyncRoutedClient registers ``FleetCollector(fleet, loop)`` in its own
registry; the router process serves it with its request counters on --metrics-port
(smg_fast/router/metrics.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .dispatch import Fleet

STATES = ("joining", "serving", "not_serving", "down", "refused")
_TOTALS = {  # Fleet.stats() counter -> help
    "requests": "Routed requests",
    "items": "Items of routed requests that succeeded",
    "failed": "Routed requests that failed (an error, an answer that could not be read, or "
              "the caller left)",
    "spills": "Items placed past their first choice by the load bound, on a member not "
              "known to hold them",
    "affinity": "Items placed past their first choice on a member this router placed the "
                "same image on recently",
    "waited": "Items that waited in the router for a member holding their image to come "
              "under the load bound",
    "late_responses": "Sub-call answers that came after their items were given up",
    "late_released": "Shm segments of late answers unlinked",
    "unread_released": "Shm segments of finished sub-calls of failed or abandoned requests "
                       "unlinked",
    "refused": "Members refused for a config fingerprint unlike the fleet's",
    "ejections": "Members ejected after consecutive transport failures",
}


class FleetCollector:
    """A Prometheus collector of one fleet's stats.

    With ``loop`` (the fleet's event loop), a scrape from another thread reads them on that loop,
    consistent with its requests."""

    def __init__(self, fleet: Fleet, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._fleet = fleet
        self._loop = loop

    def _stats(self) -> dict[str, Any]:
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop is running:
            return self._fleet.stats()

        async def read() -> dict[str, Any]:
            return self._fleet.stats()

        return asyncio.run_coroutine_threadsafe(read(), loop).result(timeout=2.0)

    def collect(self) -> Iterator[Any]:
        try:
            stats = self._stats()
        except (RuntimeError, concurrent.futures.TimeoutError):  # loop closed or stuck
            return
        for key, text in _TOTALS.items():
            yield CounterMetricFamily(f"smg_fast_router_{key}", text,
                                      value=float(stats.get(key, 0)))
        retries = CounterMetricFamily("smg_fast_router_retries", "Items sent again to their "
                                      "next member, by the status of the failed sub-call",
                                      labels=["reason"])
        for reason, n in stats["retries"].items():
            retries.add_metric([reason], float(n))
        yield retries
        hedges = CounterMetricFamily("smg_fast_router_hedges", "Hedged sub-calls: sent, won "
                                     "(the hedge answered first), lost, refused by the budget, "
                                     "members suspected", labels=["outcome"])
        for outcome, n in stats.get("hedges", {}).items():
            hedges.add_metric([outcome], float(n))
        yield hedges
        items = CounterMetricFamily("smg_fast_router_worker_items", "Items sent to a member, "
                                    "by outcome (ok, a status name, cancelled, abandoned, "
                                    "unread: the answer could not be read)",
                                    labels=["worker", "outcome"])
        flight = GaugeMetricFamily("smg_fast_router_in_flight_items", "Items in flight on a "
                                   "member (the load bound's count: a video by its size)",
                                   labels=["worker"])
        state = GaugeMetricFamily("smg_fast_router_member_state", "1 for the member's state "
                                  "(serving, not_serving, down, refused, joining)",
                                  labels=["worker", "state"])
        ejected = GaugeMetricFamily("smg_fast_router_member_ejected", "1 while ejection keeps "
                                    "the member out (its span, or its half-open probe in "
                                    "flight)", labels=["worker"])
        usable = GaugeMetricFamily("smg_fast_router_member_usable", "1 while a request may be "
                                   "placed on the member (serving, not ejected)",
                                   labels=["worker"])
        for worker, m in stats["members"].items():
            for outcome, n in m["items"].items():
                items.add_metric([worker, outcome], float(n))
            flight.add_metric([worker], float(m["in_flight"]))
            for s in STATES:
                state.add_metric([worker, s], float(m["state"] == s))
            ejected.add_metric([worker], float(m["ejected"]))
            usable.add_metric([worker], float(m["usable"]))
        yield from (items, flight, state, ejected, usable)
