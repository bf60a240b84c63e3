"""The router process's Prometheus metrics.

Its calls, its admission, and its fleet's (routing/metrics.py), on one registry served at
--metrics-port."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Histogram

from .._service.metrics import LATENCY_BUCKETS, MetricsEndpoint, StatsCollector
from ..routing.dispatch import Fleet
from ..routing.metrics import FleetCollector


class RouterMetrics(MetricsEndpoint):
    """The router process's registry: its requests, its admission, and the fleet."""

    def __init__(self, fleet: Fleet, loop: asyncio.AbstractEventLoop,
                 admission: Callable[[], dict[str, Any]],
                 receipt: Callable[[], dict[str, Any]] | None = None) -> None:
        super().__init__()
        r = self.registry
        self.requests = Counter("smg_fast_router_calls", "Preprocess calls the router answered, "
                                "by gRPC status", ["status"], registry=r)
        self.request_seconds = Histogram("smg_fast_router_call_seconds", "Preprocess latency "
                                         "through the router", buckets=LATENCY_BUCKETS,
                                         registry=r)
        r.register(FleetCollector(fleet, loop))
        sources: dict[str, Callable[[], dict[str, Any]]] = {"admission": admission}
        if receipt is not None:
            sources["receipt"] = receipt
        r.register(StatsCollector(sources, {"admission.rejected", "admission.stopped",
                                            "receipt.queued", "receipt.timed_out"}))
