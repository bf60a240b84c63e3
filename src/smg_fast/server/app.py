"""Server lifecycle.

Grpc.aio server with the Preprocessor service, health, reflection and metrics; admission (bounded
requests and bytes admitted at once, the rest RESOURCE_EXHAUSTED at once); start (sweep, load, warm
up, SERVING) and drain (NOT_SERVING, finish in-flight work up to the drain timeout, then cut it with
UNAVAILABLE, let consumers read delivered segments, stop, unlink what is left), all of it bounded by
the drain timeout plus a few seconds."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from typing import Any

import grpc

from .. import scratch_stats, use_single_block_images
from .._service.admission import Admission
from .._service.grpc_server import (
    SERVICE_NAME,
    SERVING,
    abort,
    address,
    set_health,
    start_preprocessor,
)
from .._service.receipt import Receipt
from .._service.shutdown import QUIET_S, Arrivals, off_loop, on_stop_signals
from ..transport.shm import ShmRegistry, default_outstanding_cap, shm_namespace, sweep_dead_segments
from .cache import PixelCache
from .config import ServerConfig
from .decode_budget import DecodeBudget
from .metrics import Metrics
from .models import ModelSet
from .rdma_lane import RdmaLane
from .request_error import RequestError
from .service import Outcome, PreprocessService
from .shm_shares import Callers, rdma_caller
from .ticket import Ticket

log = logging.getLogger("smg_fast.server")

__all__ = ["SERVICE_NAME", "Server", "serve"]

_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
_CLOSE_S = 3.0  # past the drain deadline: what closing the registry, RDMA and metrics may take
_SHUTTING_DOWN = "server is shutting down: retry on another replica"


def _retrieved(fut: asyncio.Future) -> None:
    """A done-callback that marks a future's exception as seen (no "never retrieved" log)."""
    if not fut.cancelled():
        fut.exception()


def _keep_pillow_blocks(workers: int) -> None:
    """Lets Pillow reuse freed image memory blocks instead of returning them to the OS.

    Decoding a large image then does not page-fault its buffers in again on every request (measured:
    a 1080p JPEG decode in a worker thread 20-25 ms -> 10 ms). PILLOW_BLOCKS_MAX, when set, wins.
    Pillow's single-block allocator (which the engine plug-ins may have turned on in this process)
    bypasses kept blocks, so it is turned off wherever blocks are kept. Memory only; outputs do not
    change."""
    from PIL import Image

    core = Image.core
    if not hasattr(core, "set_blocks_max"):
        return
    if not os.environ.get("PILLOW_BLOCKS_MAX") and core.get_blocks_max() < 2 + 2 * workers:
        core.set_blocks_max(2 + 2 * workers)
    if core.get_blocks_max() > 0:
        use_single_block_images(False)


class Server:
    """One smg-fast server. ``await start()``, then ``await stop()`` (or ``serve()``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config.validate()
        self.port: int | None = None
        self.draining = False
        self.in_flight = 0  # Preprocess calls not yet answered
        self.admission = Admission(self.config.queued_requests_limit,
                                   self.config.queued_bytes_limit)
        self.decode = DecodeBudget(self.config.decode_bytes_limit, self.config.decode_wait_s)
        self.receipt = Receipt(self.config.max_receiving_per_connection,
                               self.config.receive_timeout_s, self.config.receiving_limit)
        self.callers = Callers(self.config.trusted_router_peers)
        self._live: dict[Ticket, asyncio.Future] = {}  # in-flight calls: how to cut each
        self.cache: PixelCache | None = None
        self._deadline = 0.0
        self._stopping: asyncio.Task | None = None
        self._stopped: asyncio.Event | None = None
        self._pruner: asyncio.Task | None = None
        self.arrivals = Arrivals()

    # ---- start ----

    async def start(self) -> None:
        cfg = self.config
        self._stopped = asyncio.Event()
        swept = sweep_dead_segments(cfg.shm_dir)
        if swept:
            log.info("removed %d shm segment(s) of dead processes from %s", len(swept),
                     cfg.shm_dir)
        _keep_pillow_blocks(cfg.workers)
        self.models = ModelSet(cfg.models, cfg.max_image_pixels, cfg.image_format_list,
                               cfg.video_limits, cfg.video_decoder_threads, cfg.video_decoder,
                               cfg.video_decode == "skip")
        self.cache = PixelCache(cfg.pixel_cache_mb * 2**20) if cfg.pixel_cache_mb else None
        cap = cfg.shm_max_outstanding_mb * 2**20 or default_outstanding_cap(cfg.shm_dir)
        self.registry = ShmRegistry(cfg.shm_dir, ttl_s=cfg.shm_ttl_s,
                                    pool_bytes=cfg.shm_pool_mb * 2**20,
                                    max_outstanding_bytes=cap, share_bytes=cap // 4,
                                    reuse=bool(cfg.shm_reuse))
        log.info("shm: at most %.0f MiB of delivered, unread segments in %s (%.0f MiB per "
                 "connection%s)", cap / 2**20, cfg.shm_dir, cap / 2**22,
                 f"; per caller of a trusted router at {', '.join(cfg.trusted_router_peers)}"
                 if cfg.trusted_router_peers else "")
        sources: dict[str, Any] = {"scratch": scratch_stats, "shm": self.registry.stats,
                                   "admission": self.admission.stats, "decode": self.decode.stats,
                                   "receipt": self.receipt.stats}
        if self.registry.pool is not None:
            sources["shm_pool"] = self.registry.pool.stats
            self.registry.pool.busy = lambda: self.work_pending > 0
        if self.registry.slabs is not None:
            sources["shm_reuse"] = self.registry.slabs.stats
        if self.cache is not None:
            sources["pixel_cache"] = self.cache.stats
        self.rdma = RdmaLane(cfg)
        sources["rdma"] = self.rdma.stats
        self.metrics = Metrics(sources)
        self.namespace = shm_namespace(cfg.shm_dir)
        self.service = PreprocessService(cfg, self.models, self.cache, self.registry,
                                         self.metrics, self.namespace, self.rdma, self.decode)
        self.pool = concurrent.futures.ThreadPoolExecutor(cfg.workers,
                                                          thread_name_prefix="smg-fast-worker")
        self.server, self.health, self.port = await start_preprocessor(
            cfg.max_message_bytes, cfg.host, cfg.port, self.metrics, cfg.metrics_port,
            preprocess=self._preprocess, refuse=self._refuse, model_info=self._model_info,
            full=self.admission.full, arrivals=self.arrivals, receipt=self.receipt,
            stream_window_bytes=cfg.stream_window_kb << 10)
        await asyncio.get_running_loop().run_in_executor(self.pool, self.service.warm_up)
        if cfg.transport == "rdma":  # the default lane is up (or known to be down) before SERVING
            await asyncio.to_thread(self.rdma.start)
        await set_health(self.health, SERVING)
        self._pruner = asyncio.create_task(self._prune_loop())
        log.info("smg-fast server listening on %s (models %s, default %s; transport %s; pixel "
                 "cache %s; %d workers; metrics %s)", address(cfg.host, self.port),
                 ", ".join(f"{n}={s}" for n, s in cfg.models), self.models.default,
                 cfg.transport, f"{cfg.pixel_cache_mb} MiB" if self.cache is not None else "off",
                 cfg.workers, f"on :{cfg.metrics_port}" if cfg.metrics_port else "off")

    @property
    def work_pending(self) -> int:
        """Admitted work not yet finished (it outlives a cancelled call until its next item)."""
        return self.admission.pending

    async def _prune_loop(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(5.0)
            rounds += 1
            try:
                await asyncio.to_thread(self.registry.prune)
                if rounds % 12 == 0:  # producers that died since start, in any pid namespace
                    await asyncio.to_thread(sweep_dead_segments, self.config.shm_dir)
            except Exception:  # keep pruning whatever happens
                log.exception("shm prune failed")

    # ---- handlers ----

    async def _refuse(self, messages: Any, context: grpc.aio.ServicerContext) -> bytes:
        """A Preprocess call met a full admission: refused unread."""
        code = _UNAVAILABLE if self.draining else grpc.StatusCode.RESOURCE_EXHAUSTED
        if code != _UNAVAILABLE:
            self.admission.refused()
        self.metrics.requests.labels("", "", code.name).inc()
        await abort(context, code, _SHUTTING_DOWN if self.draining
                    else self.admission.busy_message(), retryable=True)
        return b""

    async def _preprocess(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        received = time.perf_counter()
        if self.draining:
            self.metrics.requests.labels("", "", "UNAVAILABLE").inc()
            await context.abort(_UNAVAILABLE, _SHUTTING_DOWN)
        size = len(raw)
        if not self.admission.admit(size):
            self.metrics.requests.labels("", "", "RESOURCE_EXHAUSTED").inc()
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                        self.admission.busy_message(), retryable=True)
        remaining = context.time_remaining()
        ticket = Ticket(None if remaining is None else time.monotonic() + remaining)
        loop = asyncio.get_running_loop()
        cut = loop.create_future()
        self.in_flight += 1
        self.metrics.in_flight.inc()
        peer = context.peer()
        caller, share = self.callers.identify(peer, context.invocation_metadata())
        outcome = Outcome(b"", caller=caller, share=share,
                          rdma_caller=rdma_caller(peer, caller, share))
        code, message, retryable = grpc.StatusCode.OK, "", False
        try:
            work = self.pool.submit(self.service.preprocess, raw, received, outcome, ticket)
        except RuntimeError:  # the pool was shut down: the drain began under us
            self._release(size, ticket)
            work = None
        try:
            if work is None:
                raise RequestError(_UNAVAILABLE, _SHUTTING_DOWN)
            work.add_done_callback(lambda w: self._release(size, ticket))
            self._live[ticket] = cut
            done = asyncio.wrap_future(work)
            done.add_done_callback(_retrieved)  # no "never retrieved" log once abandoned
            try:
                await asyncio.wait((done, cut), return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the caller went away: stop its work
                code = grpc.StatusCode.CANCELLED
                self._abandon(work, ticket, code, "the call was cancelled")
                raise
            if not done.done():  # cut by the drain timeout
                self._abandon(work, ticket, _UNAVAILABLE, _SHUTTING_DOWN)
                raise RequestError(_UNAVAILABLE, "server is shutting down: the drain timeout "
                                                 "cut this request; retry on another replica")
            if done.cancelled():  # the pool dropped it before it started (shutdown)
                raise RequestError(_UNAVAILABLE, _SHUTTING_DOWN)
            outcome = done.result()
        except asyncio.CancelledError:
            raise
        except RequestError as exc:
            code, message, retryable = exc.code, exc.message, exc.retryable
        except Exception as exc:
            code, message = self._internal(exc)
        finally:
            self._live.pop(ticket, None)
            self.in_flight -= 1
            self.metrics.in_flight.dec()
            self.metrics.requests.labels(outcome.model, outcome.transport, code.name).inc()
            if code == grpc.StatusCode.OK:
                self.metrics.request_seconds.labels(outcome.model).observe(
                    time.perf_counter() - received)
        if code != grpc.StatusCode.OK:
            # The failed future's exception holds this frame through its traceback: drop our
            # references so nothing of the request outlives it.
            work = done = None  # noqa: F841
            await abort(context, code, message, retryable)
        return outcome.payload

    def _release(self, size: int, ticket: Ticket) -> None:
        self.admission.release(size, ticket.fired)

    def _abandon(self, work: concurrent.futures.Future, ticket: Ticket,
                 code: grpc.StatusCode, reason: str) -> None:
        """Nobody will read this call's answer.

        Its work stops before its next item (or never starts), and what it delivered anyway is
        unlinked."""
        ticket.stop(code, reason)
        if work.cancel():  # never started
            self.admission.note_stopped()
        work.add_done_callback(self._release_late)

    def _internal(self, exc: BaseException) -> tuple[grpc.StatusCode, str]:
        log.error("internal error while preprocessing", exc_info=exc)
        return (grpc.StatusCode.INTERNAL,
                f"internal error while preprocessing ({type(exc).__name__}); details are in "
                "the server log")

    def _release_late(self, work: concurrent.futures.Future) -> None:
        """A request was cancelled while its work ran: drop the segments it produced."""
        if not work.cancelled() and work.exception() is None:
            self.service.release(work.result())

    async def _model_info(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return self.service.model_info()

    # ---- stop ----

    def request_stop(self, timeout: float | None = None) -> asyncio.Task:
        """Starts draining (idempotent); a second call hurries it (no more waiting)."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.stop(timeout))
        else:
            log.warning("second stop request: not waiting any longer")
            self._deadline = 0.0
        return self._stopping

    async def stop(self, timeout: float | None = None) -> None:
        """Drain.

        NOT_SERVING and UNAVAILABLE for new requests; wait (up to the drain timeout) for in-flight
        requests, then for consumers to read delivered shm segments; cut what is still running
        (UNAVAILABLE, its work stops before its next item); once no call came for QUIET_S (callers
        saw NOT_SERVING or UNAVAILABLE) or at the drain timeout, stop the gRPC server; unlink every
        segment still owned. Blocking closes run off the event loop, so the whole stop takes at most
        about the drain timeout + _CLOSE_S."""
        assert self._stopped is not None
        if self.draining:
            await self._stopped.wait()
            return
        loop = asyncio.get_running_loop()
        budget = self.config.drain_timeout_s if timeout is None else timeout
        self._deadline = loop.time() + budget
        self.draining = True
        log.info("draining: %d request(s) in flight, up to %.1f s", self.in_flight, budget)
        await self.health.enter_graceful_shutdown()
        while (self.in_flight or self.work_pending) and loop.time() < self._deadline:
            await asyncio.sleep(0.01)
        if self.in_flight or self.work_pending:
            log.warning("drain timeout: cutting %d request(s)", self.in_flight)
        for ticket, cut in list(self._live.items()):  # answered UNAVAILABLE, work stopped
            ticket.stop(_UNAVAILABLE, _SHUTTING_DOWN)
            if not cut.done():
                cut.set_result(None)
        self.pool.shutdown(wait=False, cancel_futures=True)
        while loop.time() < self._deadline and await asyncio.to_thread(self.registry.prune):
            await asyncio.sleep(0.02)
        if not await asyncio.to_thread(self.rdma.wait_released,
                                       max(0.0, self._deadline - loop.time())):
            log.warning("drain timeout: RDMA slots still unconfirmed; closing the exporter")
        if self._pruner is not None:
            self._pruner.cancel()
        if not await self.arrivals.quiet(QUIET_S, lambda: self._deadline):
            log.warning("drain timeout: callers still send; stopping (calls that reach us now "
                        "end CANCELLED)")
        # a short grace even past the deadline: the cut calls' UNAVAILABLE answers go out
        await self.server.stop(grace=max(0.25, min(1.0, self._deadline - loop.time())))
        end = loop.time() + _CLOSE_S
        removed = await off_loop(self.registry.close, end, "unlinking shm segments")
        await off_loop(self.rdma.close, end, "closing the RDMA lane")
        await off_loop(self.metrics.close, end, "closing the metrics endpoint")
        log.info("stopped; unlinked %s unread shm segment(s)", removed)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()


async def serve(config: ServerConfig, *, handle_signals: bool = True) -> Server:
    """Runs a server until SIGTERM / SIGINT (drain, then stop); returns it, stopped."""
    server = Server(config)
    await server.start()
    if handle_signals:
        on_stop_signals(server.request_stop)
    await server.wait_stopped()
    return server
