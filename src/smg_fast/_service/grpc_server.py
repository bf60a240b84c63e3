"""The gRPC server every smg-fast process runs.

The encode server runs it, and so does the router in front of a fleet of them. The grpc.aio server
and its options, the method dispatch that can refuse a call before its message is read, health and
reflection, and answers with status metadata."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .._proto import preprocessor_pb2 as pb
from .channel import message_size_options
from .metrics import MetricsEndpoint
from .receipt import RECEIVE_TIMEOUT_S, RECEIVING_PER_CONNECTION, Receipt
from .shutdown import Arrivals
from .wire import trailers

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Preprocessor"].full_name  # smg_fast.v1.Preprocessor
PREPROCESS = f"/{SERVICE_NAME}/Preprocess"
MODEL_INFO = f"/{SERVICE_NAME}/GetModelInfo"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
STREAMS_PER_CONNECTION = 64  # concurrent RPCs one client connection may have open
# Clients (routers) send keepalive pings to find a peer that hangs (SIGSTOP, a dead host) long
# before any deadline: accept them this often, even on a connection whose only call is an idle
# health Watch (the default, 5 minutes, would answer GOAWAY "too many pings").
MIN_PING_INTERVAL_MS = 500
STREAM_WINDOW_BYTES = 256 << 10  # HTTP/2 window of a stream whose message is not being read
STREAM_WINDOW_KB = (64, 65536)  # the range --stream-window-kb accepts


def address(host: str, port: int) -> str:
    """host:port, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def grpc_server(max_message_bytes: int, stream_window_bytes: int = STREAM_WINDOW_BYTES
                ) -> grpc.aio.Server:
    """A grpc.aio server.

    No server-wide maximum_concurrent_rpcs: grpc counts every open RPC against it, health Watch
    streams included, so a few idle streams would lock out health checks and all work. Admission
    (which refuses most calls before their message is read) bounds the work; receipt.py and the
    stream window (``stream_window_bytes``) bound what one connection can upload at once."""
    return grpc.aio.server(options=[
        *message_size_options(max_message_bytes),
        ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION),
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        # A call's stream takes no more than this of its message until the call reads it (one
        # reading gets its whole message's worth): BDP probing would raise it to megabytes.
        # It also caps one upload at a window per round trip (--stream-window-kb).
        ("grpc.http2.lookahead_bytes", stream_window_bytes),
        ("grpc.http2.bdp_probe", 0),
    ])


def listen(server: grpc.aio.Server, host: str, port: int) -> int:
    """Binds host:port; returns the port (the one chosen for 0); OSError when it cannot."""
    try:
        bound = server.add_insecure_port(address(host, port))
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address(host, port)}: {exc}") from None
    if not bound:
        raise OSError(f"cannot listen on {address(host, port)}")
    return bound


class Handlers(grpc.GenericRpcHandler):
    """Picks a call's handler before its message is read.

    While ``full()`` (admission, for a request of the recent typical size), a Preprocess call goes
    to ``refuse``, which never reads the message, so a flood of big messages is not received only to
    be dropped. Admission in ``preprocess`` stays the exact check: it knows the size. Otherwise
    the call is taken before its message arrives and ``receipt`` reads it (bounded per connection,
    in all and in time: receipt.py). Every call of the service is noted in ``arrivals`` (a drain
    waits for them to stop)."""

    def __init__(self, preprocess: Callable[..., Awaitable[bytes]],
                 refuse: Callable[..., Awaitable[bytes]],
                 model_info: Callable[..., Awaitable[bytes]], full: Callable[[], bool],
                 arrivals: Arrivals | None = None, receipt: Receipt | None = None) -> None:
        self._full = full
        self.arrivals = arrivals or Arrivals()
        self.receipt = receipt or Receipt(RECEIVING_PER_CONNECTION, RECEIVE_TIMEOUT_S)

        async def received(messages: Any, context: grpc.aio.ServicerContext) -> bytes:
            return await preprocess(await self.receipt.read(context), context)

        self._preprocess = grpc.stream_unary_rpc_method_handler(received)
        self._refuse = grpc.stream_unary_rpc_method_handler(refuse)
        self._info = grpc.unary_unary_rpc_method_handler(model_info)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if method in (PREPROCESS, MODEL_INFO):
            self.arrivals.note()
        if method == PREPROCESS:
            return self._refuse if self._full() else self._preprocess
        if method == MODEL_INFO:
            return self._info
        return None


async def add_health_and_reflection(server: grpc.aio.Server) -> health.aio.HealthServicer:
    """Adds health and reflection to server; returns the health servicer.

    grpc.health.v1 ("" and the service, NOT_SERVING until the caller says otherwise) and reflection
    of the Preprocessor, health and reflection services."""
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    await set_health(servicer, NOT_SERVING)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    return servicer


async def start_preprocessor(
        max_message_bytes: int, host: str, port: int, metrics: MetricsEndpoint,
        metrics_port: int, *, preprocess: Callable[..., Awaitable[bytes]],
        refuse: Callable[..., Awaitable[bytes]], model_info: Callable[..., Awaitable[bytes]],
        full: Callable[[], bool], arrivals: Arrivals | None = None,
        receipt: Receipt | None = None, stream_window_bytes: int = STREAM_WINDOW_BYTES,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """Starts a Preprocessor server on host:port, and metrics' endpoint on metrics_port (0: off).

    Its methods are dispatched by Handlers (the keyword arguments are theirs), with health
    (NOT_SERVING until the caller says otherwise) and reflection. Returns (server, health
    servicer, the port bound); OSError when it cannot listen."""
    server = grpc_server(max_message_bytes, stream_window_bytes)
    server.add_generic_rpc_handlers((Handlers(preprocess, refuse, model_info, full, arrivals,
                                              receipt),))
    servicer = await add_health_and_reflection(server)
    bound = listen(server, host, port)
    if metrics_port:
        await metrics.serve(host, metrics_port)
    await server.start()
    return server, servicer, bound


async def set_health(servicer: health.aio.HealthServicer, status: int) -> None:
    """Sets status for "" and the Preprocessor service."""
    for name in ("", SERVICE_NAME):
        await servicer.set(name, status)


async def abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str,
                retryable: bool = False) -> None:
    """Ends the call with code and message.

    A RESOURCE_EXHAUSTED answer says in its trailing metadata whether another try can succeed."""
    await context.abort(code, message, trailing_metadata=trailers(code, retryable))
