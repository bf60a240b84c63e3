"""Prometheus metrics of one server or router (each its own registry, so several can share a
process), and the /metrics endpoint they share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
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


class Metrics(MetricsEndpoint):
    def __init__(self, sources: dict[str, Callable[[], dict[str, Any]]] | None = None) -> None:
        super().__init__()
        r = self.registry
        self.requests = Counter("smg_fast_requests", "Preprocess requests by model, requested "
                                "transport and gRPC status", ["model", "transport", "status"],
                                registry=r)
        self.request_seconds = Histogram("smg_fast_request_seconds", "Preprocess latency on "
                                         "the server", ["model"], buckets=LATENCY_BUCKETS,
                                         registry=r)
        self.decode_seconds = Histogram("smg_fast_decode_seconds", "Per image: read, hash, "
                                        "decode and size (a JPEG decoded inside its compute: "
                                        "its decode's CPU time)", buckets=LATENCY_BUCKETS,
                                        registry=r)
        self.preprocess_seconds = Histogram("smg_fast_preprocess_seconds", "Per image: resize "
                                            "+ normalize + patchify (a JPEG decoded inside that "
                                            "work: the part past its decode's CPU time)",
                                            buckets=LATENCY_BUCKETS, registry=r)
        self.transport_seconds = Histogram("smg_fast_transport_seconds", "Per image: writing "
                                           "the tensor to its transport", ["transport"],
                                           buckets=LATENCY_BUCKETS, registry=r)
        self.bytes_out = Counter("smg_fast_bytes_out", "Tensor bytes handed out", ["transport"],
                                 registry=r)
        self.fallbacks = Counter("smg_fast_fallback", "Items that asked for rdma or shm and "
                                 "went by another transport, by reason (nixl_unavailable, "
                                 "agent_failed, register_failed, listen_failed, starting, "
                                 "arena_full, too_large, lease_expired, below_min_bytes; "
                                 "shm_namespace, shm_cap, shm_share, shm_full, shm_fds) and "
                                 "the transport used",
                                 ["reason", "used"], registry=r)
        self.in_flight = Gauge("smg_fast_in_flight_requests", "Requests being served",
                               registry=r)
        counters = {f"pixel_cache.{k}" for k in ("hits", "misses", "coalesced", "evictions",
                                                 "inserts", "rejected")}
        counters |= {f"scratch.{k}" for k in ("hits", "misses", "gives", "drops", "remote_gives")}
        counters |= {"shm.created", "shm.expired", "shm.released", "shm.refused",
                     "shm_pool.hits", "shm_pool.misses", "shm_pool.made", "shm_pool.failed",
                     "shm_reuse.reused", "shm_reuse.made", "shm_reuse.busy",
                     "shm_reuse.dropped", "shm_reuse.declined"}
        counters |= {"admission.rejected", "admission.stopped", "pixel_cache.takeovers"}
        counters |= {f"rdma.{k}" for k in ("leased", "committed", "freed", "reaped", "full",
                                           "too_large", "unknown_free", "refused_free",
                                           "bad_notifications", "metadata_served",
                                           "metadata_dropped")}
        r.register(StatsCollector(sources or {}, counters))
