"""Clients that spread each request's images over a fleet of smg-fast servers.

    from smg_fast.routing import AsyncRoutedClient
    async with AsyncRoutedClient(["10.0.0.1:50051", "10.0.0.2:50051"]) as fleet:
        out = await fleet.preprocess(images, dtype="bfloat16")
        out.items[0].worker   # the server that made it

Each image goes to the first member in its rendezvous order that is under the load bound
(placement.py); the images one member gets travel in one Preprocess call, all calls at once,
under the caller's deadline. Only items whose call failed with a transient code are sent again,
each to its key's next member; anything else fails the request naming the caller's item index.
A response that comes back after its items went elsewhere (or after the request failed) is
released: its shm segments are unlinked, its RDMA handles left to expire.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import grpc

from .._proto import preprocessor_pb2 as pb
from ..client import PreprocessResult, _options, build_request, read_response
from ..transport.shm_owner import SHM_DIR, is_segment_name
from ..transport.tensors import shm_namespace
from .membership import Member, Membership
from .placement import choose, item_key

log = logging.getLogger("smg_fast.routing")

_C = grpc.StatusCode
_PEER = {_C.UNAVAILABLE, _C.DEADLINE_EXCEEDED, _C.CANCELLED}  # a peer that died or left
_TRANSIENT = _PEER | {_C.RESOURCE_EXHAUSTED}  # admission or shm space: another member may take it
_ITEM = re.compile(r"\bitem (\d+)\b")


class RoutedError(grpc.RpcError):
    """A failed routed request: the server's code and details, item indices rewritten to the
    caller's; ``index`` is that item's position in the caller's request (None: whole request)."""

    def __init__(self, code: grpc.StatusCode, details: str, index: int | None = None) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details, self.index = code, details, index

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def _renumber(details: str, indices: list[int]) -> tuple[str, int | None]:
    """The server named items of its sub-request; the caller knows them by its own indices."""
    found: list[int] = []

    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        if k >= len(indices):
            return m.group(0)
        found.append(indices[k])
        return f"item {indices[k]}"

    text = _ITEM.sub(sub, details)
    return text, (found[0] if found else None)


def release(resp: Any) -> int:
    """Unlinks the shm segments a response we will not use holds; returns how many."""
    n = 0
    for it in resp.items:
        if it.pixel_values.WhichOneof("payload") != "shm":
            continue  # inline: garbage; remote: the server reaps the slot at its TTL
        name = it.pixel_values.shm.name
        if not is_segment_name(name):
            continue  # never unlink what is not an smg-fast segment
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            n += 1
        except FileNotFoundError:
            pass
    return n


class AsyncRoutedClient:
    """asyncio routed client; create it inside the event loop that uses it.

    ``load_factor``: a member may hold ceil(load_factor x (in-flight + 1) / members) items, and
    at least ``floor`` (so a quiet fleet keeps every image on its first choice).
    ``eject_after`` consecutive transport failures eject a member for ``eject_base_s``,
    doubling per repeat, then one request probes it."""

    def __init__(self, targets: Iterable[str], *, load_factor: float = 1.25, floor: int = 4,
                 timeout: float | None = None, max_message_mb: int = 256,
                 join_timeout: float = 10.0, eject_after: int = 3, eject_base_s: float = 1.0,
                 puller: Any = None) -> None:
        if load_factor < 1.0 or floor < 1:
            raise ValueError(f"need load_factor >= 1 and floor >= 1, got {load_factor}, {floor}")
        self.load_factor, self.floor, self.timeout = load_factor, floor, timeout
        self.join_timeout, self.puller = join_timeout, puller
        self.namespace = shm_namespace()
        self.membership = Membership(channel_options=_options(max_message_mb),
                                     eject_after=eject_after, eject_base_s=eject_base_s)
        self._joining = [self.membership.add(t) for t in targets]
        self._late: set[asyncio.Task] = set()
        self.counts: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()

    # ---- membership ----

    async def _ready(self) -> None:
        """Waits (once, bounded) for the first join attempt of the members given at start."""
        if self._joining:
            waits = [asyncio.ensure_future(m.joined.wait()) for m in self._joining]
            self._joining = []
            _, slow = await asyncio.wait(waits, timeout=self.join_timeout)
            for w in slow:  # still joining: they are placed on once SERVING
                w.cancel()

    async def add(self, target: str) -> bool:
        """Joins target; False when it was refused (a different config) or not yet reachable."""
        m = self.membership.add(target)
        try:
            await asyncio.wait_for(m.joined.wait(), self.join_timeout)
        except asyncio.TimeoutError:
            return False
        return m.state == "serving"

    async def remove(self, target: str) -> None:
        """Stops placing on target; its calls in flight are retried elsewhere."""
        await self.membership.remove(target)

    def stats(self) -> dict[str, Any]:
        return {**dict(self.counts), "retries": dict(self.retries), **self.membership.stats()}

    # ---- requests ----

    async def preprocess(self, images: Any, model: str | None = None, dtype: str = "float32",
                         transport: str = "auto", *, min_pixels: int | None = None,
                         max_pixels: int | None = None, request_id: str | None = None,
                         as_torch: bool = False,
                         timeout: float | None = None) -> PreprocessResult:
        """As :meth:`smg_fast.client.AsyncClient.preprocess`; raises :class:`RoutedError`."""
        await self._ready()
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        timeout = timeout or self.timeout
        deadline = None if timeout is None else loop.time() + timeout
        req = build_request(images, model=model, dtype=dtype, transport=transport,
                            min_pixels=min_pixels, max_pixels=max_pixels,
                            request_id=request_id, namespace=self.namespace)
        name = req.model or self.membership.default_model
        keys = [item_key(it, name, req.dtype, min_pixels, max_pixels) for it in req.items]
        n = len(keys)
        results: list[Any] = [None] * n
        tried: list[set[str]] = [set() for _ in range(n)]
        last: list[tuple[grpc.StatusCode, str] | None] = [None] * n
        timings: Counter[str] = Counter()
        pending = list(range(n))
        live: dict[asyncio.Task, tuple[Member, list[int]]] = {}
        self.counts["requests"] += 1
        try:
            while pending or live:
                for m, idx in self._place(pending, keys, tried, last).items():
                    task = loop.create_task(self._call(m, idx, req, name, deadline, as_torch))
                    live[task] = (m, idx)
                pending = []
                done, _ = await asyncio.wait(live, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    m, idx = live.pop(task)
                    status, value = task.result()
                    if status == "ok":
                        for i, item in zip(idx, value.items, strict=True):
                            item.worker = m.target
                            results[i] = item
                        for k, v in value.timings.items():
                            timings[k] = max(timings[k], v)  # the calls ran side by side
                        continue
                    code, details = value
                    if not self._retryable(code, deadline, loop):
                        text, index = _renumber(details, idx)
                        raise RoutedError(code, text, index)
                    self.retries[code.name] += len(idx)
                    text = _renumber(details, idx)[0]
                    for i in idx:
                        tried[i].add(m.target)
                        last[i] = (code, text)
                    pending.extend(idx)
                pending.sort()
        finally:
            for task in live:  # a failed or cancelled request: its other calls are not used
                task.add_done_callback(self._release_task)
        self.counts["items"] += n
        out = PreprocessResult(req.request_id, results, dict(timings))
        out.latency_s = time.perf_counter() - t0
        return out

    def _retryable(self, code: grpc.StatusCode, deadline: float | None,
                   loop: asyncio.AbstractEventLoop) -> bool:
        # nothing is retried once the caller's own deadline has passed
        return code in _TRANSIENT and (deadline is None or loop.time() < deadline)

    def _place(self, pending: list[int], keys: list[bytes], tried: list[set[str]],
               last: list[tuple[grpc.StatusCode, str] | None]) -> dict[Member, list[int]]:
        """Each pending item's member (not one it already failed on), under the load bound."""
        usable = {m.target: m for m in self.membership.usable()}
        load = {t: m.in_flight for t, m in usable.items()}
        groups: dict[Member, list[int]] = {}
        for i in pending:
            candidates = [t for t in usable if t not in tried[i]]
            if not candidates:
                code, details = last[i] or (_C.UNAVAILABLE, "no serving member in the fleet")
                raise RoutedError(code, f"{details} (item {i}, tried on {len(tried[i])} "
                                        "member(s))", i)
            target, spilled = choose(keys[i], candidates, load, self.load_factor, self.floor)
            load[target] += 1
            self.counts["spills"] += spilled
            groups.setdefault(usable[target], []).append(i)
        for m, idx in groups.items():
            m.probing = m.ejections > 0  # half-open: this call decides
            # counted at once, so that requests placed in the same moment see each other
            m.in_flight += len(idx)
        return groups

    async def _call(self, m: Member, idx: list[int], req: Any, model: str,
                    deadline: float | None, as_torch: bool) -> tuple[str, Any]:
        """("ok", PreprocessResult) or ("error", (code, details)); the member's in-flight count
        covers the RPC until it really ends, even when we stopped waiting for it."""
        sub = pb.PreprocessRequest()
        sub.CopyFrom(req)
        sub.model = model
        del sub.items[:]
        sub.items.extend(req.items[i] for i in idx)
        loop = asyncio.get_running_loop()
        timeout = None if deadline is None else max(0.0, deadline - loop.time())
        try:  # (the in-flight count was taken by _place; released when the RPC really ends)
            rpc = asyncio.ensure_future(m.stub.Preprocess(sub, timeout=timeout))
        except BaseException:
            m.in_flight -= len(idx)
            m.probing = False
            raise

        def ended(_: asyncio.Future) -> None:
            m.in_flight -= len(idx)

        rpc.add_done_callback(ended)
        lost = asyncio.ensure_future(m.lost.wait())
        try:
            await asyncio.wait({rpc, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            rpc.add_done_callback(self._release_rpc)
            raise
        finally:
            lost.cancel()
        if not rpc.done():  # the member went away: its answer, if any, is not ours any more
            rpc.add_done_callback(self._release_rpc)
            self.membership.failure(m)
            self._outcome(m, "abandoned", len(idx))
            return "error", (_C.UNAVAILABLE, f"{m.target} stopped serving")
        exc = rpc.exception()
        if isinstance(exc, grpc.aio.AioRpcError):
            expired = deadline is not None and loop.time() >= deadline
            if exc.code() in _PEER and not expired:
                self.membership.failure(m)  # the peer, not the caller's own deadline
            else:  # the server answered (or our deadline ended it): the member is alive
                self.membership.success(m)
            self._outcome(m, exc.code().name.lower(), len(idx))
            return "error", (exc.code(), exc.details() or "")
        resp = rpc.result()
        self.membership.success(m)
        if len(resp.items) != len(idx):
            release(resp)
            return "error", (_C.INTERNAL, f"{m.target} answered {len(resp.items)} items for "
                                          f"{len(idx)}")
        try:
            if any(it.pixel_values.WhichOneof("payload") == "remote" for it in resp.items):
                out = await asyncio.to_thread(read_response, resp, as_torch=as_torch,
                                              puller=self.puller)  # READs stay off the loop
            else:
                out = read_response(resp, as_torch=as_torch)
        except BaseException:
            release(resp)  # what read_response had not reached yet
            raise
        self._outcome(m, "ok", len(idx))
        return "ok", out

    def _outcome(self, m: Member, outcome: str, n: int) -> None:
        m.items[outcome] = m.items.get(outcome, 0) + n

    def _release_rpc(self, rpc: asyncio.Future) -> None:
        if not rpc.cancelled() and rpc.exception() is None:
            self.counts["late_released"] += release(rpc.result())

    def _release_task(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        status, value = task.result()
        if status == "ok":
            self.counts["late_released"] += len(value.items)  # mapped: dropping them frees them

    async def close(self) -> None:
        await self.membership.close()

    async def __aenter__(self) -> AsyncRoutedClient:
        await self._ready()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class RoutedClient:
    """Synchronous routed client: an :class:`AsyncRoutedClient` on a private event loop
    thread (one per client; the calls of several threads share it)."""

    def __init__(self, targets: Iterable[str], *, load_factor: float = 1.25, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="smg-fast-routing")
        self._thread.start()

        async def make() -> AsyncRoutedClient:
            fleet = AsyncRoutedClient(targets, load_factor=load_factor, **kwargs)
            await fleet._ready()
            return fleet

        self._fleet = self._run(make())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def preprocess(self, images: Any, model: str | None = None, dtype: str = "float32",
                   transport: str = "auto", *, min_pixels: int | None = None,
                   max_pixels: int | None = None, request_id: str | None = None,
                   as_torch: bool = False, timeout: float | None = None) -> PreprocessResult:
        """As :meth:`smg_fast.client.Client.preprocess`; raises :class:`RoutedError`."""
        return self._run(self._fleet.preprocess(
            images, model, dtype, transport, min_pixels=min_pixels, max_pixels=max_pixels,
            request_id=request_id, as_torch=as_torch, timeout=timeout))

    def add(self, target: str) -> bool:
        return self._run(self._fleet.add(target))

    def remove(self, target: str) -> None:
        self._run(self._fleet.remove(target))

    def stats(self) -> dict[str, Any]:
        async def get() -> dict[str, Any]:
            return self._fleet.stats()

        return self._run(get())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._fleet.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> RoutedClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
