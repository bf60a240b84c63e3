"""The router's settings (``RouterConfig``), their defaults and their checks.

Flags.py reads them from the command line and the environment."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._service.admission import queued_bytes_limit
from .._service.grpc_server import STREAM_WINDOW_KB
from .._service.process import LOG_LEVELS
from .._service.receipt import RECEIVE_TIMEOUT_S, RECEIVING_PER_CONNECTION, receiving_limit
from ..routing.checks import check_spec


@dataclass
class RouterConfig:
    """Every setting of one router; ``validate()`` checks them (ValueError naming the flag)."""

    workers: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 50050
    load_factor: float = 1.25
    floor: int = 4
    affinity_keys: int = 65536
    affinity_wait_s: float = 0.01
    metrics_port: int = 0
    log_level: str = "info"
    drain_timeout_s: float = 30.0
    max_message_mb: int = 256
    request_timeout_s: float = 60.0
    attempt_timeout_s: float = 0.0  # 0: a sub-call may take the whole request's time
    keepalive_s: float = 10.0
    join_timeout_s: float = 10.0
    eject_after: int = 3
    eject_base_s: float = 1.0
    max_queued_requests: int = 0  # 0: auto, see queued_requests_limit
    max_queued_mb: int = 0  # 0: auto, see queued_bytes_limit
    resolve_every_s: float = 5.0  # dns:, dns+srv: and file: workers are read again this often
    hedge_percentile: float = 95.0  # 0: never hedge
    hedge_ratio: float = 0.05
    max_receiving_per_connection: int = RECEIVING_PER_CONNECTION
    max_receiving: int = 0  # 0: auto, see receiving_limit
    receive_timeout_s: float = RECEIVE_TIMEOUT_S
    stream_window_kb: int = 256

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    @property
    def queued_requests_limit(self) -> int:
        """Preprocess requests routed at once (the router only waits on its members)."""
        return self.max_queued_requests or 1024

    @property
    def queued_bytes_limit(self) -> int:
        return queued_bytes_limit(self.max_queued_mb)

    @property
    def receiving_limit(self) -> int:
        """Calls reading their message at once, all connections together (as the server's)."""
        return receiving_limit(self.max_receiving, self.max_receiving_per_connection,
                               self.queued_bytes_limit, self.max_message_bytes)

    def validate(self) -> RouterConfig:
        if not self.workers:
            raise ValueError("at least one --worker HOST:PORT is needed")
        for w in self.workers:
            check_spec(w, "--worker")
        if len(set(self.workers)) != len(self.workers):
            raise ValueError(f"a --worker is given twice: {self.workers}")
        floats = {"--load-factor": self.load_factor, "--drain-timeout-s": self.drain_timeout_s,
                  "--request-timeout-s": self.request_timeout_s,
                  "--attempt-timeout-s": self.attempt_timeout_s,
                  "--keepalive-s": self.keepalive_s, "--join-timeout-s": self.join_timeout_s,
                  "--affinity-wait-s": self.affinity_wait_s,
                  "--eject-base-s": self.eject_base_s,
                  "--resolve-every-s": self.resolve_every_s,
                  "--receive-timeout-s": self.receive_timeout_s}
        for flag, value in floats.items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{flag} must be a finite number >= 0, got {value}")
        for flag, port in (("--port", self.port), ("--metrics-port", self.metrics_port)):
            if not 0 <= port <= 65535:
                raise ValueError(f"{flag} must be 0..65535, got {port}")
        if self.load_factor < 1.0:
            raise ValueError(f"--load-factor must be >= 1, got {self.load_factor}")
        if self.floor < 1 or self.eject_after < 1:
            raise ValueError("--floor and --eject-after must be >= 1")
        if min(self.request_timeout_s, self.join_timeout_s, self.eject_base_s,
               self.resolve_every_s) <= 0:
            raise ValueError("--request-timeout-s, --join-timeout-s, --eject-base-s and "
                             "--resolve-every-s must be > 0")
        if 0 < self.keepalive_s < 1:
            raise ValueError(f"--keepalive-s must be 0 (off) or >= 1, got {self.keepalive_s}")
        if not 1 <= self.max_message_mb <= 2047:
            raise ValueError(f"--max-message-mb must be 1..2047, got {self.max_message_mb}")
        if self.max_queued_requests < 0 or self.max_queued_mb < 0 or self.affinity_keys < 0:
            raise ValueError("--max-queued-requests, --max-queued-mb and --affinity-keys must "
                             "be >= 0")
        if not (self.hedge_percentile == 0 or 50 <= self.hedge_percentile < 100):
            raise ValueError(f"--hedge-percentile must be 0 (off) or 50..<100, got "
                             f"{self.hedge_percentile}")
        if not 0 <= self.hedge_ratio <= 1:
            raise ValueError(f"--hedge-ratio must be 0..1, got {self.hedge_ratio}")
        if not 1 <= self.max_receiving_per_connection <= 64 or not 0 <= self.max_receiving \
                <= 65536:
            raise ValueError("--max-receiving-per-connection must be 1..64 and --max-receiving "
                             "0 (auto) .. 65536")
        if not 0 < self.receive_timeout_s <= 3600:
            raise ValueError("--receive-timeout-s must be in (0, 3600]")
        lo, hi = STREAM_WINDOW_KB
        if not lo <= self.stream_window_kb <= hi:
            raise ValueError(f"--stream-window-kb must be {lo}..{hi}, got "
                             f"{self.stream_window_kb}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"--log-level must be one of {LOG_LEVELS}")
        return self
