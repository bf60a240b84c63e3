"""What the server's and the router's Prometheus metrics share.

Each its own registry (so several can share a process) served on its own /metrics endpoint, the
latency buckets, and the collector of counters read at scrape time.

The endpoint runs on the process's event loop, not a thread per connection: at most
``MAX_CONNECTIONS`` at once (one more closes the oldest that has not sent its request yet, else
it is closed itself), each sends its request head (at most ``MAX_HEAD`` bytes) within
``READ_TIMEOUT_S``, gets one answer and is closed; the exposition is rendered on the loop's
default executor (a bounded pool), since a collector may wait for the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

MAX_CONNECTIONS = 64
MAX_HEAD = 8192
READ_TIMEOUT_S = 2.0

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
        self._http: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: dict[asyncio.StreamWriter, None] = {}  # no request yet, oldest first
        self.connections = 0  # open now
        self.refused = 0  # closed for want of room (the new one, or the oldest still silent)

    async def serve(self, host: str, port: int) -> None:
        """Listens on host:port (OSError when it cannot)."""
        self._loop = asyncio.get_running_loop()
        self._http = await asyncio.start_server(self._answer, host, port, limit=MAX_HEAD)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            self.refused += 1
            if not self._reading:
                writer.close()
                return
            oldest = next(iter(self._reading))
            del self._reading[oldest]
            oldest.close()  # its read ends, and so does its handler
        self.connections += 1
        self._reading[writer] = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            finally:
                self._reading.pop(writer, None)
            method, target = head.split(b"\r\n", 1)[0].split(b" ")[:2]
            if method not in (b"GET", b"HEAD"):
                status, body = b"405 Method Not Allowed", b"GET /metrics\n"
            elif target.split(b"?", 1)[0] not in (b"/", b"/metrics"):
                status, body = b"404 Not Found", b"GET /metrics\n"
            else:
                status = b"200 OK"
                body = await asyncio.get_running_loop().run_in_executor(
                    None, generate_latest, self.registry)
            kind = CONTENT_TYPE_LATEST.encode() if status == b"200 OK" else b"text/plain"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind
                         + b"\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + (b"" if method == b"HEAD" else body))
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, ConnectionError):
            pass  # a slow, short or malformed request gets nothing more
        finally:
            self.connections -= 1
            writer.close()

    def close(self) -> None:
        """Stops listening (callable from any thread)."""
        http, loop, self._http = self._http, self._loop, None
        if http is None or loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(http.close)
        except RuntimeError:  # the loop is gone
            pass
