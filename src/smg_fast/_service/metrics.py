"""What the server's and the router's Prometheus metrics share.

Each its own registry (so several can share a process) served on its own /metrics endpoint, the
latency buckets, and the collector of counters read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                    0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class StatsCollector:
    """Exports dicts of counters / gauges read at scrape time (pixel cache, scratch pools, shm)."""

    def __init__(self, sources: dict[str, Callable[[], dict[str, Any]]],
                 counters: set[str]) -> None:
        self._sources = sources
        self._counters = counters

    def collect(self) -> Iterator[Any]:
        for prefix, fn in self._sources.items():
            try:
                stats = fn()
            except Exception:  # a scrape never breaks the server
                continue
            for key, value in stats.items():
                name = f"smg_fast_{prefix}_{key}"
                if f"{prefix}.{key}" in self._counters:
                    yield CounterMetricFamily(name, f"{prefix} {key}", value=float(value))
                else:
                    yield GaugeMetricFamily(name, f"{prefix} {key}", value=float(value))


class MetricsEndpoint:
    """A registry and the HTTP endpoint that serves it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._http: Any = None

    def serve(self, host: str, port: int) -> None:
        out = start_http_server(port, addr=host, registry=self.registry)
        self._http = out[0] if isinstance(out, tuple) else None

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
