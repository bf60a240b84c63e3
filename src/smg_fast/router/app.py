"""The router process.

``smg_fast.v1.Preprocessor`` (Preprocess, GetModelInfo) in front of a fleet, with health, reflection
and metrics, for callers that cannot embed the library.

Each request is routed by a :class:`~smg_fast.routing.dispatch.Fleet` as the library routes it,
and the members' items go back unchanged: inline bytes, shm names, rdma descriptors (with shm
or rdma the pixel bytes never cross the router). The caller's shm_namespace is forwarded, so
``auto`` gets shm from a worker on the caller's host. Admission bounds the requests and bytes
routed at once (the server's limits); past them RESOURCE_EXHAUSTED (retryable) at once.
Health is SERVING while some member serves and the router is not draining; SIGTERM drains as
the server does: NOT_SERVING and UNAVAILABLE for new calls, requests in flight may finish up to
the drain timeout, then are cut with UNAVAILABLE (their sub-calls cancelled).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from .._proto import preprocessor_pb2 as pb
from .._service.admission import Admission
from .._service.grpc_server import (
    NOT_SERVING,
    SERVING,
    abort,
    address,
    set_health,
    start_preprocessor,
)
from .._service.receipt import Receipt
from .._service.shutdown import QUIET_S, Arrivals, off_loop, on_stop_signals
from .._service.wire import MAX_ITEMS, too_many_items
from .._version import __version__
from ..routing.dispatch import Fleet
from ..routing.forwarded_caller import CALLER
from ..routing.membership import Member
from ..routing.routed_error import RoutedError
from ..routing.self_check import SELF_DETAIL, asked_by_self
from .config import RouterConfig
from .metrics import RouterMetrics

log = logging.getLogger("smg_fast.router")

_C = grpc.StatusCode
_SHUTTING_DOWN = "router is shutting down: retry on another replica"
_HEALTH_EVERY_S = 0.25


async def _passthrough(m: Member, resp: Any) -> list[Any]:
    return list(resp.items)  # handles and bytes as the member gave them


class Router:
    """One router. ``await start()``, then ``await stop()`` (or :func:`serve`)."""

    def __init__(self, config: RouterConfig) -> None:
        self.config = config.validate()
        self.port: int | None = None
        self.draining = False
        self.in_flight = 0
        self.admission = Admission(self.config.queued_requests_limit,
                                   self.config.queued_bytes_limit)
        self._live: set[asyncio.Task] = set()  # routes in flight (the drain cuts them)
        self._stopping: asyncio.Task | None = None
        self._stopped = asyncio.Event()
        self._health_task: asyncio.Task | None = None
        self._serving = False
        self._deadline = 0.0  # of the drain (loop time)
        self.arrivals = Arrivals()

    async def start(self) -> None:
        cfg = self.config
        self.fleet = Fleet(cfg.workers, load_factor=cfg.load_factor, floor=cfg.floor,
                           affinity_keys=cfg.affinity_keys, affinity_wait=cfg.affinity_wait_s,
                           attempt_timeout=cfg.attempt_timeout_s or None,
                           max_message_mb=cfg.max_message_mb, join_timeout=cfg.join_timeout_s,
                           eject_after=cfg.eject_after, eject_base_s=cfg.eject_base_s,
                           keepalive_s=cfg.keepalive_s, resolve_every_s=cfg.resolve_every_s,
                           hedge_percentile=cfg.hedge_percentile, hedge_ratio=cfg.hedge_ratio)
        self.receipt = Receipt(cfg.max_receiving_per_connection, cfg.receive_timeout_s,
                               cfg.receiving_limit)
        self.metrics = RouterMetrics(self.fleet, asyncio.get_running_loop(),
                                     self.admission.stats, self.receipt.stats)
        self.server, self.health, self.port = await start_preprocessor(
            cfg.max_message_bytes, cfg.host, cfg.port, self.metrics, cfg.metrics_port,
            preprocess=self._preprocess, refuse=self._refuse, model_info=self._model_info,
            full=self.admission.full, arrivals=self.arrivals, receipt=self.receipt,
            stream_window_bytes=cfg.stream_window_kb << 10)
        await self.fleet._ready()
        await self._update_health()
        self._health_task = asyncio.create_task(self._health_loop())
        log.info("smg-fast router listening on %s in front of %s (load factor %g, floor %d, "
                 "affinity %d images, wait %g s; metrics %s)", address(cfg.host, self.port),
                 ", ".join(cfg.workers), cfg.load_factor, cfg.floor, cfg.affinity_keys,
                 cfg.affinity_wait_s,
                 f"on :{cfg.metrics_port}" if cfg.metrics_port else "off")

    async def _update_health(self) -> None:
        serving = not self.draining and bool(self.fleet.membership.usable())
        if serving != self._serving:
            self._serving = serving
            await set_health(self.health, SERVING if serving else NOT_SERVING)

    async def _health_loop(self) -> None:
        while not self.draining:
            await asyncio.sleep(_HEALTH_EVERY_S)
            await self._update_health()

    # ---- handlers ----

    async def _refuse(self, messages: Any, context: grpc.aio.ServicerContext) -> bytes:
        """A Preprocess call met a full admission: refused unread."""
        if self.draining:
            self.metrics.requests.labels(_C.UNAVAILABLE.name).inc()
            await abort(context, _C.UNAVAILABLE, _SHUTTING_DOWN)
        self.admission.refused()
        self.metrics.requests.labels(_C.RESOURCE_EXHAUSTED.name).inc()
        await abort(context, _C.RESOURCE_EXHAUSTED, self.admission.busy_message(), True)
        return b""

    async def _preprocess(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        t0 = time.perf_counter()
        if self.draining:
            self.metrics.requests.labels(_C.UNAVAILABLE.name).inc()
            await abort(context, _C.UNAVAILABLE, _SHUTTING_DOWN)
        size = len(raw)
        if not self.admission.admit(size):
            self.metrics.requests.labels(_C.RESOURCE_EXHAUSTED.name).inc()
            await abort(context, _C.RESOURCE_EXHAUSTED, self.admission.busy_message(), True)
        self.in_flight += 1
        code, message, retryable, payload = _C.OK, "", False, b""
        try:
            payload, handles = await self._route(raw, context.time_remaining(), context.peer())
            if handles is not None:
                # A caller gone between here and the send (cancelled, or its deadline passed)
                # never reads the shm segments: unlink them, as a server does for its own.
                def unread(ctx: Any, resp: Any = handles) -> None:
                    if ctx.cancelled():
                        self.fleet.discard(resp)

                context.add_done_callback(unread)
        except RoutedError as exc:
            code, message, retryable = exc.code(), exc.details(), exc.retryable
        except _Refused as exc:
            code, message = exc.args
        except asyncio.CancelledError:  # the caller went away: the fleet cancelled its calls
            code = _C.CANCELLED
            raise
        except Exception as exc:  # answered, never a stack trace to the caller
            log.error("internal error while routing", exc_info=exc)
            code, message = _C.INTERNAL, (f"internal error while routing "
                                          f"({type(exc).__name__}); details are in the log")
        finally:
            self.admission.release(size)
            self.in_flight -= 1
            self.metrics.requests.labels(code.name).inc()
            if code == _C.OK:
                self.metrics.request_seconds.observe(time.perf_counter() - t0)
        if code != _C.OK:
            await abort(context, code, message, retryable)
        return payload

    async def _route(self, raw: bytes, remaining: float | None,
                     peer: str) -> tuple[bytes, Any]:
        """The response payload, and the response when its shm segments are ours to unlink.

        The response comes back (else None) when its shm segments are this host's to unlink if
        the caller never reads them. The sub-calls name peer to the workers
        (routing/forwarded_caller.py): a worker trusting this router gives each caller its own
        shm share."""
        try:
            req = pb.PreprocessRequest.FromString(raw)
        except DecodeError:
            raise _Refused(_C.INVALID_ARGUMENT, "malformed PreprocessRequest message") from None
        if not req.items:
            raise _Refused(_C.INVALID_ARGUMENT, "request has no items")
        if len(req.items) > MAX_ITEMS:
            raise _Refused(_C.INVALID_ARGUMENT, too_many_items(len(req.items)))
        timeout = self.config.request_timeout_s
        if remaining is not None:
            timeout = min(timeout, max(remaining, 1e-3))
        named = CALLER.set(peer)  # the route's task (and its sub-calls) copy it
        try:
            work = asyncio.ensure_future(self.fleet.route(req, _passthrough, timeout))
        finally:
            CALLER.reset(named)
        self._live.add(work)
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:
            work.cancel()
            if (work.done() and not work.cancelled() and work.exception() is None
                    and req.shm_namespace == self.fleet.namespace):
                # routed just as the caller left: nobody will read these segments (a route
                # cut before it ended unlinks those of its finished sub-calls itself)
                self.fleet.discard(pb.PreprocessResponse(items=work.result()[0]))
            raise
        finally:
            self._live.discard(work)
        if work.cancelled():  # cut by the drain
            raise _Refused(_C.UNAVAILABLE, "router is shutting down: the drain timeout cut "
                                           "this request; retry on another replica")
        items, timings = work.result()
        resp = pb.PreprocessResponse(request_id=req.request_id, items=items,
                                     timings=pb.Timings(**timings))
        payload = resp.SerializeToString()
        if len(payload) > self.config.max_message_bytes:
            if req.shm_namespace == self.fleet.namespace:
                self.fleet.discard(resp)
            raise RoutedError(_C.RESOURCE_EXHAUSTED, (
                f"response would be about {len(payload) / 2**20:.1f} MiB, over the router's "
                f"{self.config.max_message_mb} MiB message limit: request transport 'shm' "
                "(same host) or 'rdma', or send fewer images per request"))
        local = req.shm_namespace == self.fleet.namespace and any(
            it.pixel_values.WhichOneof("payload") == "shm" for it in resp.items)
        return payload, resp if local else None

    async def _model_info(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if asked_by_self(context.invocation_metadata()):  # a record names this router
            await abort(context, _C.FAILED_PRECONDITION, SELF_DETAIL)
        info = self.fleet.membership.info(__version__, self.config.max_message_bytes)
        if info is None:
            await abort(context, _C.UNAVAILABLE, "no member of the fleet is serving")
        return info.SerializeToString()

    # ---- stop ----

    def request_stop(self, timeout: float | None = None) -> asyncio.Task:
        """Starts draining (idempotent); a second call cuts what still runs at once."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.stop(timeout))
        else:
            log.warning("second stop request: cutting requests in flight")
            self._deadline = 0.0
            self._cut()
        return self._stopping

    def _cut(self) -> None:
        for work in list(self._live):
            work.cancel()

    async def stop(self, timeout: float | None = None) -> None:
        """NOT_SERVING and UNAVAILABLE for new calls.

        In-flight requests may finish up to the drain timeout, then are cut (UNAVAILABLE); once no
        call came for QUIET_S (or at the drain timeout) the server stops, the fleet closes."""
        if self.draining:
            await self._stopped.wait()
            return
        loop = asyncio.get_running_loop()
        budget = self.config.drain_timeout_s if timeout is None else timeout
        self._deadline = loop.time() + budget
        self.draining = True
        log.info("draining: %d request(s) in flight, up to %.1f s", self.in_flight, budget)
        if self._health_task is not None:
            self._health_task.cancel()
        await self.health.enter_graceful_shutdown()
        while self.in_flight and loop.time() < self._deadline:
            await asyncio.sleep(0.01)
        if self.in_flight:
            log.warning("drain timeout: cutting %d request(s)", self.in_flight)
        self._cut()
        if not await self.arrivals.quiet(QUIET_S, lambda: self._deadline):
            log.warning("drain timeout: callers still send; stopping")
        await self.server.stop(grace=max(0.25, min(1.0, self._deadline - loop.time())))
        await self.fleet.close()
        await off_loop(self.metrics.close, loop.time() + 3.0, "closing the metrics endpoint")
        log.info("stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


class _Refused(Exception):
    """A request the router refuses itself: (code, message)."""


async def serve(config: RouterConfig, *, handle_signals: bool = True) -> Router:
    """Runs a router until SIGTERM / SIGINT (drain, then stop); returns it, stopped."""
    router = Router(config)
    try:
        await router.start()
    except BaseException:
        if hasattr(router, "fleet"):
            await router.fleet.close()
        raise
    if handle_signals:
        on_stop_signals(router.request_stop)
    await router.wait_stopped()
    return router
