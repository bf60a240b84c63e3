"""Clients that spread each request's images over a fleet of smg-fast servers.

    from smg_fast.routing import AsyncRoutedClient
    async with AsyncRoutedClient(["10.0.0.1:50051", "10.0.0.2:50051"]) as fleet:
        out = await fleet.preprocess(images, dtype="bfloat16")
        out.items[0].worker   # the server that made it

Each image goes to a member under the load bound: one it was placed on recently (it has the
pixels), else the first in its rendezvous order (placement.py); the images one member gets
travel in one Preprocess call, all calls at once, under the caller's deadline. Only items whose
call failed with a transient code are sent again, each to its key's next member; anything else
fails the request naming the caller's item index. A response that comes back after its items
went elsewhere (or after the request failed) is released: its shm segments are unlinked, its
RDMA handles left to expire.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import Any

from ..client import PreprocessResult, build_request, read_response
from .checks import check_targets
from .dispatch import Fleet, RoutedError
from .membership import Member
from .messages import release

__all__ = ["AsyncRoutedClient", "RoutedClient", "RoutedError", "release"]


class AsyncRoutedClient(Fleet):
    """asyncio routed client.

    Create it inside the event loop that uses it. The keyword arguments are
    :class:`~smg_fast.routing.dispatch.Fleet`'s (load_factor, floor, affinity_keys, affinity_wait,
    timeout, attempt_timeout, join_timeout, eject_after, eject_base_s, keepalive_s, max_message_mb,
    resolve_every_s, hedge_percentile, hedge_ratio);
    ``puller`` pulls rdma handles (default: smg_fast.transport.rdma.default_puller). ``targets``:
    HOST:PORT strings (one string is one member) or sources of members (``dns:///NAME:PORT``,
    ``dns://SERVER/NAME:PORT``, ``dns+srv:///NAME``, ``file:///PATH``), at least one."""

    def __init__(self, targets: str | Iterable[str], *, puller: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(check_targets(targets), **kwargs)
        self.puller = puller

    async def preprocess(self, images: Any = None, model: str | None = None,
                         dtype: str = "float32", transport: str = "auto", *,
                         min_pixels: int | None = None, max_pixels: int | None = None,
                         request_id: str | None = None, as_torch: bool = False,
                         timeout: float | None = None, encoding: str = "", expand: bool = False,
                         videos: Any = None,
                         videos_kwargs: dict[str, Any] | None = None) -> PreprocessResult:
        """As :meth:`smg_fast.client.AsyncClient.preprocess`; raises :class:`RoutedError`.

        Each video is one item: placed by its key as an image is."""
        t0 = time.perf_counter()
        req = build_request(images, model=model, dtype=dtype, transport=transport,
                            min_pixels=min_pixels, max_pixels=max_pixels,
                            request_id=request_id, namespace=self.namespace, encoding=encoding,
                            videos=videos, videos_kwargs=videos_kwargs)

        async def finish(m: Member, resp: Any) -> list[Any]:
            if any(it.pixel_values.WhichOneof("payload") == "remote" for it in resp.items):
                out = await asyncio.to_thread(read_response, resp, as_torch=as_torch,
                                              puller=self.puller, expand=expand)  # off the loop
            else:
                out = read_response(resp, as_torch=as_torch, expand=expand)
            for item in out.items:
                item.worker = m.target
            return out.items

        items, timings = await self.route(req, finish, timeout)
        out = PreprocessResult(req.request_id, items, timings)
        out.latency_s = time.perf_counter() - t0
        return out


class RoutedClient:
    """Synchronous routed client.

    An :class:`AsyncRoutedClient` on a private event loop thread (one per client; the calls of
    several threads share it)."""

    def __init__(self, targets: str | Iterable[str], *, load_factor: float = 1.25,
                 **kwargs: Any) -> None:
        targets = check_targets(targets)  # (before the thread: bad arguments start nothing)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="smg-fast-routing")
        self._thread.start()

        async def make() -> AsyncRoutedClient:
            fleet = AsyncRoutedClient(targets, load_factor=load_factor, **kwargs)
            try:
                await fleet._ready()
            except BaseException:
                await fleet.close()
                raise
            return fleet

        try:
            self._fleet = self._run(make())
        except BaseException:  # (bad arguments): the private loop and its thread end here
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            raise

    def _run(self, coro: Any) -> Any:
        if self._loop.is_closed():  # (not the loop's own error, nor a never-awaited coroutine)
            coro.close()
            raise RuntimeError("this RoutedClient is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def preprocess(self, images: Any = None, model: str | None = None, dtype: str = "float32",
                   transport: str = "auto", *, min_pixels: int | None = None,
                   max_pixels: int | None = None, request_id: str | None = None,
                   as_torch: bool = False, timeout: float | None = None, encoding: str = "",
                   expand: bool = False, videos: Any = None,
                   videos_kwargs: dict[str, Any] | None = None) -> PreprocessResult:
        """As :meth:`smg_fast.client.Client.preprocess`; raises :class:`RoutedError`."""
        return self._run(self._fleet.preprocess(
            images, model, dtype, transport, min_pixels=min_pixels, max_pixels=max_pixels,
            request_id=request_id, as_torch=as_torch, timeout=timeout, encoding=encoding,
            expand=expand, videos=videos, videos_kwargs=videos_kwargs))

    def add(self, target: str) -> bool:
        return self._run(self._fleet.add(target))

    def remove(self, target: str) -> None:
        self._run(self._fleet.remove(target))

    def stats(self) -> dict[str, Any]:
        async def get() -> dict[str, Any]:
            return self._fleet.stats()

        return self._run(get())

    def close(self) -> None:
        """Closes the fleet and ends every task left on the private loop before stopping it."""
        if self._loop.is_closed():
            return

        async def shutdown() -> None:
            await self._fleet.close()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            if rest:
                await asyncio.wait(rest, timeout=5.0)

        self._run(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> RoutedClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
