"""The server's Prometheus metrics.

Its requests, stage latencies, transports and fallbacks, and the stats of its caches, pools and
admission read at scrape time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from .._service.metrics import LATENCY_BUCKETS, MetricsEndpoint, StatsCollector


class Metrics(MetricsEndpoint):
    """The server's registry and its metrics."""

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
                                 "arena_full, arena_share, too_large, lease_expired, "
                                 "below_min_bytes; shm_namespace, shm_cap, shm_share, "
                                 "shm_full, shm_fds) and the transport used",
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
        counters |= {"admission.rejected", "admission.stopped", "pixel_cache.takeovers",
                     "decode.rejected", "decode.waited", "receipt.queued",
                     "receipt.timed_out"}
        counters |= {f"rdma.{k}" for k in ("leased", "committed", "freed", "reaped", "full",
                                           "too_large", "unknown_free", "refused_free",
                                           "bad_notifications", "metadata_served",
                                           "metadata_dropped", "share_refused")}
        r.register(StatsCollector(sources or {}, counters))
