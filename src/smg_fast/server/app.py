"""Server lifecycle: grpc.aio server with the Preprocessor service, health, reflection and
metrics; start (sweep, load, warm up, SERVING) and drain (NOT_SERVING, finish in-flight work,
let consumers read delivered segments, stop, unlink what is left)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import threading
import time
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .. import scratch_stats
from .._proto import preprocessor_pb2 as pb
from ..cache import PixelCache
from ..shm import ShmRegistry, default_outstanding_cap, shm_namespace, sweep_dead_segments
from .config import ServerConfig
from .errors import RequestError
from .metrics import Metrics
from .models import ModelSet
from .rdma_lane import RdmaLane
from .service import Outcome, PreprocessService

log = logging.getLogger("smg_fast.server")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Preprocessor"].full_name  # smg_fast.v1.Preprocessor
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _keep_pillow_blocks(workers: int) -> None:
    """Lets Pillow reuse freed image memory blocks instead of returning them to the OS, so
    decoding a large image does not page-fault its buffers in again on every request (measured:
    a 1080p JPEG decode in a worker thread 20-25 ms -> 10 ms). PILLOW_BLOCKS_MAX, when set,
    wins. Memory only; outputs do not change."""
    if os.environ.get("PILLOW_BLOCKS_MAX"):
        return
    from PIL import Image

    core = Image.core
    if hasattr(core, "set_blocks_max") and core.get_blocks_max() < 2 + 2 * workers:
        core.set_blocks_max(2 + 2 * workers)


class Server:
    """One smg-fast server. ``await start()``, then ``await stop()`` (or ``serve()``)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config.validate()
        self.port: int | None = None
        self.draining = False
        self.in_flight = 0  # Preprocess calls not yet answered
        self.work_pending = 0  # their pool work items still running (outlive cancelled calls)
        self._work_lock = threading.Lock()
        self.cache: PixelCache | None = None
        self._deadline = 0.0
        self._stopping: asyncio.Task | None = None
        self._stopped: asyncio.Event | None = None
        self._pruner: asyncio.Task | None = None

    # ---- start ----

    async def start(self) -> None:
        cfg = self.config
        self._stopped = asyncio.Event()
        swept = sweep_dead_segments(cfg.shm_dir)
        if swept:
            log.info("removed %d shm segment(s) of dead processes from %s", len(swept),
                     cfg.shm_dir)
        _keep_pillow_blocks(cfg.workers)
        self.models = ModelSet(cfg.models, cfg.max_image_pixels, cfg.image_format_list)
        self.cache = PixelCache(cfg.pixel_cache_mb * 2**20) if cfg.pixel_cache_mb else None
        cap = cfg.shm_max_outstanding_mb * 2**20 or default_outstanding_cap(cfg.shm_dir)
        self.registry = ShmRegistry(cfg.shm_dir, ttl_s=cfg.shm_ttl_s,
                                    pool_bytes=cfg.shm_pool_mb * 2**20,
                                    max_outstanding_bytes=cap, share_bytes=cap // 2)
        log.info("shm: at most %.0f MiB of delivered, unread segments in %s (%.0f MiB per "
                 "connection)", cap / 2**20, cfg.shm_dir, cap / 2**21)
        sources: dict[str, Any] = {"scratch": scratch_stats, "shm": self.registry.stats}
        if self.registry.pool is not None:
            sources["shm_pool"] = self.registry.pool.stats
            self.registry.pool.busy = lambda: self.work_pending > 0
        if self.cache is not None:
            sources["pixel_cache"] = self.cache.stats
        self.rdma = RdmaLane(cfg)
        sources["rdma"] = self.rdma.stats
        self.metrics = Metrics(sources)
        self.namespace = shm_namespace(cfg.shm_dir)
        self.service = PreprocessService(cfg, self.models, self.cache, self.registry,
                                         self.metrics, self.namespace, self.rdma)
        self.pool = concurrent.futures.ThreadPoolExecutor(cfg.workers,
                                                          thread_name_prefix="smg-fast-worker")
        limit = cfg.max_message_bytes
        self.server = grpc.aio.server(options=[
            ("grpc.max_send_message_length", limit),
            ("grpc.max_receive_message_length", limit),
            ("grpc.so_reuseport", 0),
        ])
        handlers = {
            "Preprocess": grpc.unary_unary_rpc_method_handler(self._preprocess),
            "GetModelInfo": grpc.unary_unary_rpc_method_handler(self._model_info),
        }
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        for name in ("", SERVICE_NAME):
            await self.health.set(name, _NOT_SERVING)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self.server)
        try:
            self.port = self.server.add_insecure_port(_address(cfg.host, cfg.port))
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {_address(cfg.host, cfg.port)}: {exc}") from None
        if not self.port:
            raise OSError(f"cannot listen on {_address(cfg.host, cfg.port)}")
        if cfg.metrics_port:
            self.metrics.serve(cfg.host, cfg.metrics_port)
        await self.server.start()
        await asyncio.get_running_loop().run_in_executor(self.pool, self.service.warm_up)
        if cfg.transport == "rdma":  # the default lane is up (or known to be down) before SERVING
            await asyncio.to_thread(self.rdma.start)
        for name in ("", SERVICE_NAME):
            await self.health.set(name, _SERVING)
        self._pruner = asyncio.create_task(self._prune_loop())
        log.info("smg-fast server listening on %s (models %s, default %s; transport %s; pixel "
                 "cache %s; %d workers; metrics %s)", _address(cfg.host, self.port),
                 ", ".join(f"{n}={s}" for n, s in cfg.models), self.models.default,
                 cfg.transport, f"{cfg.pixel_cache_mb} MiB" if self.cache is not None else "off",
                 cfg.workers, f"on :{cfg.metrics_port}" if cfg.metrics_port else "off")

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

    async def _preprocess(self, raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        received = time.perf_counter()
        if self.draining:
            self.metrics.requests.labels("", "", "UNAVAILABLE").inc()
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                "server is shutting down: retry on another replica")
        self.in_flight += 1
        self.metrics.in_flight.inc()
        outcome = Outcome(b"", caller=context.peer())
        code, message = grpc.StatusCode.OK, ""
        work = self.pool.submit(self.service.preprocess, raw, received, outcome)
        with self._work_lock:
            self.work_pending += 1
        work.add_done_callback(self._work_done)
        try:
            outcome = await asyncio.wrap_future(work)
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            work.add_done_callback(self._release_late)
            raise
        except RequestError as exc:
            code, message = exc.code, exc.message
        except RuntimeError as exc:
            if self.draining:  # the pool or the shm registry was shut down under us
                code, message = grpc.StatusCode.UNAVAILABLE, "server is shutting down"
            else:
                code, message = self._internal(exc)
        except Exception as exc:
            code, message = self._internal(exc)
        finally:
            self.in_flight -= 1
            self.metrics.in_flight.dec()
            self.metrics.requests.labels(outcome.model, outcome.transport, code.name).inc()
            if code == grpc.StatusCode.OK:
                self.metrics.request_seconds.labels(outcome.model).observe(
                    time.perf_counter() - received)
        if code != grpc.StatusCode.OK:
            await context.abort(code, message)
        return outcome.payload

    def _work_done(self, work: concurrent.futures.Future) -> None:
        with self._work_lock:
            self.work_pending -= 1

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
        """Drain: NOT_SERVING and UNAVAILABLE for new requests; wait (up to the drain timeout)
        for in-flight requests, then for consumers to read delivered shm segments; stop the
        gRPC server; unlink every segment still owned."""
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
        if self.in_flight:
            log.warning("drain timeout: cancelling %d request(s)", self.in_flight)
        while loop.time() < self._deadline and await asyncio.to_thread(self.registry.prune):
            await asyncio.sleep(0.02)
        if not await asyncio.to_thread(self.rdma.wait_released,
                                       max(0.0, self._deadline - loop.time())):
            log.warning("drain timeout: RDMA slots still unconfirmed; closing the exporter")
        if self._pruner is not None:
            self._pruner.cancel()
        await self.server.stop(grace=min(1.0, max(0.0, self._deadline - loop.time())))
        removed = self.registry.close()
        self.rdma.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.metrics.close()
        log.info("stopped; unlinked %d unread shm segment(s)", removed)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()


async def serve(config: ServerConfig, *, handle_signals: bool = True) -> None:
    """Runs a server until SIGTERM / SIGINT (drain, then stop)."""
    server = Server(config)
    await server.start()
    if handle_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.request_stop)
    await server.wait_stopped()


class BackgroundServer:
    """A server on its own event loop thread (tests, embedding in a synchronous program)::

        with BackgroundServer(ServerConfig(port=0)) as srv:
            client = Client(f"127.0.0.1:{srv.port}")
    """

    def __init__(self, config: ServerConfig) -> None:
        self.server = Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    @property
    def target(self) -> str:
        return _address(self.server.config.host, self.port)

    def start(self, timeout: float = 60.0) -> BackgroundServer:
        self._thread = threading.Thread(target=self._run, name="smg-fast-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("server did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            await self.server.wait_stopped()

        asyncio.run(main())

    def stop(self, timeout: float | None = None) -> None:
        """Drains and stops (timeout: the drain budget, default the config's)."""
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.server.stop(timeout), self._loop)
        fut.result()
        self._thread.join(10)

    def call(self, fn: Any, *args: Any) -> Any:
        """Runs fn(*args) on the server's loop (e.g. to start a stop without waiting)."""
        assert self._loop is not None
        return self._loop.call_soon_threadsafe(fn, *args)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
