"""The Preprocess work itself, run in a worker thread: parse, validate, decode, preprocess (through
the pixel cache when on), deliver each tensor inline or in /dev/shm, serialize.

Every failure becomes a RequestError carrying its gRPC status; every shm segment created for a
request that then fails is unlinked before the error leaves. A Ticket from the handler stops the
work between items once the RPC is cancelled, its deadline passes or the drain cuts it.
"""

from __future__ import annotations

import errno
import logging
import re
import subprocess
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
from blake3 import blake3
from google.protobuf.message import DecodeError

from .. import __version__, _native
from .._dtypes import parse_dtype
from .._proto import preprocessor_pb2 as pb
from .._proto import tensor_pb2
from ..cache import CacheEntry, PixelCache, cache_key
from ..errors import InvalidImageError
from ..processors import Processor
from ..rdma import TRANSPORT as RDMA_TRANSPORT
from ..rdma import Descriptor, ExportRefused
from ..shm import ShmQuotaError, ShmRegistry, owner_id
from .config import TRANSPORTS, ServerConfig
from .errors import RequestError, StoppedError
from .inputs import resolve_item
from .metrics import Metrics
from .models import ModelSet
from .rdma_lane import RdmaLane

log = logging.getLogger("smg_fast.server")

MAX_ITEMS = 1024  # images per request
_MAX_PIXELS_FIELD = 1 << 40  # a per-request min/max_pixels above it is refused
_OVERHEAD = 64 * 1024  # response bytes besides the tensors (grids, hashes, framing), generous
_INVALID = grpc.StatusCode.INVALID_ARGUMENT
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def _forget(exc: BaseException) -> None:
    """Drops the locals of the frames a failed request's exception went through (a decoded
    image, an output buffer): the exception may outlive this request (a coalesced waiter's,
    a log record's), its buffers must not."""
    traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None


def _us(seconds: float) -> int:
    return max(0, int(seconds * 1e6))


@dataclass
class Timer:
    decode: float = 0.0
    preprocess: float = 0.0
    transport: float = 0.0


@dataclass
class Outcome:
    """A served request: the serialized response and what the caller's side needs to know."""

    payload: bytes
    segments: list[str] = field(default_factory=list)
    leases: list[str] = field(default_factory=list)  # RDMA slot keys
    model: str = ""
    transport: str = ""
    caller: str = ""  # the gRPC peer: its share of unread shm bytes is counted apart
    shm_refused: str = ""  # why a request that asked for shm may not have it
    output_bytes: int = 0  # planned output of the items admitted so far


class Ticket:
    """The handler's word to the work: stop (a code and a reason), and the RPC's deadline (on
    time.monotonic()). Plain attribute writes: safe to set from the event loop thread."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.code: grpc.StatusCode | None = None
        self.reason = ""
        self.fired = False  # the work stopped because of this ticket

    def stop(self, code: grpc.StatusCode, reason: str) -> None:
        if self.code is None:
            self.reason = reason
            self.code = code

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self) -> None:
        """Raises RequestError when the work must not go on."""
        code = self.code
        if code is not None:
            self.fired = True
            raise StoppedError(code, self.reason)
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.fired = True
            raise StoppedError(grpc.StatusCode.DEADLINE_EXCEEDED,
                               "the request's deadline passed; its remaining work was skipped")


@dataclass
class _Item:
    index: int
    data: bytes
    digest: bytes
    planned: Any = None  # its PlannedBatch (header read, nothing decoded), set by _admit


class PreprocessService:
    def __init__(self, config: ServerConfig, models: ModelSet, cache: PixelCache | None,
                 registry: ShmRegistry, metrics: Metrics, namespace: str,
                 rdma: RdmaLane | None = None) -> None:
        self.config = config
        self.models = models
        self.cache = cache
        self.registry = registry
        self.metrics = metrics
        self.namespace = namespace
        self.rdma = rdma if rdma is not None else RdmaLane(config)
        self._info = self._model_info().SerializeToString()
        self._shm_warned: set[str] = set()

    # ---- GetModelInfo ----

    def _model_info(self) -> Any:
        out = pb.GetModelInfoResponse(
            default_model=self.models.default, shm_namespace=self.namespace,
            default_transport=self.config.transport, shm_min_bytes=self.config.shm_min_bytes,
            max_message_bytes=self.config.max_message_bytes,
            pixel_cache_bytes=self.cache.capacity_bytes if self.cache is not None else 0,
            version=__version__)
        for m in self.models.models.values():
            c = m.proc.config
            out.models.add(name=m.name, family=c.family, config_fingerprint=m.fingerprint,
                           patch_size=c.patch_size, merge_size=c.merge_size,
                           temporal_patch_size=c.temporal_patch_size, default_dtype="float32",
                           min_pixels=c.min_pixels or 0, max_pixels=c.max_pixels or 0,
                           max_image_pixels=c.max_image_pixels or 0, source=m.source)
        return out

    def model_info(self) -> bytes:
        if not self.rdma.ready:
            return self._info
        extra = pb.GetModelInfoResponse(rdma_available=True,
                                        rdma_max_bytes=self.rdma.exporter.max_payload)
        return self._info + extra.SerializeToString()  # proto3: concatenation merges

    # ---- warm-up ----

    def warm_up(self) -> None:
        """Runs every loaded processor once on a small image (builds LUTs, fills pools)."""
        from ..patterns import test_pattern_bytes

        png = test_pattern_bytes(96, 64, "PNG")
        for m in self.models.models.values():
            batch = m.proc.prepare(png, "float32")
            batch.write_into(_native.pooled_empty(batch.nbytes).view(batch.np_dtype))

    # ---- Preprocess ----

    def preprocess(self, raw: bytes, received: float, outcome: Outcome | None = None,
                   ticket: Ticket | None = None) -> Outcome:
        """Serves one request (in a worker thread); fills and returns outcome (its model and
        transport are set as soon as known, for the caller's metrics). Raises RequestError only,
        and a fresh one: its traceback does not reach the frames (and the big buffers) of the
        work that failed."""
        outcome = Outcome(b"") if outcome is None else outcome
        try:
            return self._serve(raw, received, outcome, Ticket() if ticket is None else ticket)
        except RequestError as exc:
            err = RequestError(exc.code, exc.message)
            _forget(exc)
        except MemoryError as exc:
            err = RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               "the server ran out of memory for this request: retry later "
                               "with backoff, or send fewer or smaller images")
            _forget(exc)
        except OverflowError as exc:  # a numeric request field past what the math can hold
            err = RequestError(_INVALID, f"a numeric value in the request is out of range "
                                         f"({_OBJECT_REPR.sub('the data', str(exc))})")
            _forget(exc)
        except subprocess.SubprocessError as exc:  # an external decoder failed on the data
            err = RequestError(_INVALID, "cannot decode the image: its decoder failed")
            _forget(exc)
        except Exception as exc:
            if isinstance(exc, RuntimeError) and self.registry.closed:  # shut down under us
                err = RequestError(grpc.StatusCode.UNAVAILABLE, "server is shutting down: "
                                                                "retry on another replica")
            else:
                log.error("internal error while preprocessing", exc_info=exc)
                err = RequestError(grpc.StatusCode.INTERNAL,
                                   f"internal error while preprocessing ({type(exc).__name__}); "
                                   "details are in the server log")
            _forget(exc)
        raise err

    def _serve(self, raw: bytes, received: float, outcome: Outcome, ticket: Ticket) -> Outcome:
        ticket.check()  # cancelled or past its deadline while queued: never start
        start = time.perf_counter()
        try:
            req = pb.PreprocessRequest.FromString(raw)
        except DecodeError:
            raise RequestError(_INVALID, "malformed PreprocessRequest message") from None
        model = self.models.get(req.model)
        outcome.model = model.name
        try:
            dtype = parse_dtype(req.dtype or "float32")
        except ValueError:
            raise RequestError(_INVALID, f"unsupported dtype {req.dtype!r}: use 'float32', "
                                         "'bfloat16' or 'float16'") from None
        requested = req.transport or self.config.transport
        if requested not in TRANSPORTS:
            raise RequestError(_INVALID, f"unknown transport {req.transport!r}: use one of "
                                         f"{TRANSPORTS} or '' for the server default")
        outcome.transport = requested
        min_px = req.min_pixels if req.HasField("min_pixels") and req.min_pixels else None
        max_px = req.max_pixels if req.HasField("max_pixels") and req.max_pixels else None
        if max(min_px or 0, max_px or 0) > _MAX_PIXELS_FIELD:  # beyond any image; sizes overflow
            raise RequestError(_INVALID, f"min_pixels/max_pixels must be at most 2**40, got "
                                         f"{min_px}/{max_px}")
        proc, fingerprint = self.models.variant(model, min_px, max_px)
        if not req.items:
            raise RequestError(_INVALID, "request has no items")
        if len(req.items) > MAX_ITEMS:
            raise RequestError(_INVALID, f"{len(req.items)} items, at most {MAX_ITEMS} per "
                                         "request")
        shm_ok, outcome.shm_refused = self._shm_allowed(requested, req.shm_namespace)
        resp = pb.PreprocessResponse(request_id=req.request_id)
        timer = Timer()
        inline_budget = self.config.max_message_bytes - _OVERHEAD
        try:
            read = 0  # bytes this request made the server read from files and data: URLs
            for index, item in enumerate(req.items):
                ticket.check()
                t0 = time.perf_counter()
                data = resolve_item(index, item, self.config.allowed_media_dirs,
                                    self.config.max_message_bytes)
                if item.WhichOneof("source") == "url":
                    # A few bytes of URL must not buy unbounded reading: all of a request's
                    # URLs together resolve to at most one message's worth.
                    read += len(data)
                    if read > self.config.max_message_bytes:
                        raise RequestError(
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"item {index}: the request's URLs resolve to more than "
                            f"{self.config.max_message_mb} MiB (--max-message-mb): send fewer "
                            "per request")
                it = _Item(index, data, blake3(data).digest())
                timer.decode += time.perf_counter() - t0
                out = resp.items.add(content_hash=it.digest)
                if self.cache is None:
                    inline_budget = self._uncached(proc, it, dtype, shm_ok, out, timer,
                                                   inline_budget, outcome)
                else:
                    inline_budget = self._cached(proc, fingerprint, it, dtype, shm_ok, out,
                                                 timer, inline_budget, outcome, ticket)
            resp.timings.queue_us = _us(start - received)
            resp.timings.decode_us = _us(timer.decode)
            resp.timings.preprocess_us = _us(timer.preprocess)
            resp.timings.transport_us = _us(timer.transport)
            resp.timings.total_us = _us(time.perf_counter() - received)
            payload = resp.SerializeToString()
            if len(payload) > self.config.max_message_bytes:
                raise self._too_big(len(payload))
            outcome.payload = payload
            return outcome
        except BaseException as exc:
            self.release(outcome)
            # The caller keeps the exception (in a future, in a reference cycle through its
            # traceback): drop what this request built (inline tensors, decoded images) now,
            # not at the next garbage collection. Line numbers stay for the log.
            raw = req = resp = out = it = data = payload = None  # noqa: F841
            traceback.clear_frames(exc.__traceback__)
            raise

    def release(self, outcome: Outcome) -> None:
        """Unlinks the segments of a request that will not be answered."""
        for name in outcome.segments:
            self.registry.release(name)
        outcome.segments.clear()
        for key in outcome.leases:
            self.rdma.free(key)
        outcome.leases.clear()

    def _shm_allowed(self, requested: str, namespace: str) -> tuple[bool, str]:
        """Whether items may go by shm: only to a caller that sees the server's /dev/shm (its
        shm_namespace equals ours); and, for a request that asked for shm, why not."""
        if requested == "inline":
            return False, ""
        if namespace == self.namespace:
            return True, ""
        return False, "shm_namespace" if requested == "shm" else ""  # auto/rdma: inline

    def _too_big(self, nbytes: int) -> RequestError:
        limit = self.config.max_message_bytes
        return RequestError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"response would be about {nbytes / 2**20:.1f} MiB, over the "
            f"{limit / 2**20:.0f} MiB message limit: request transport 'shm' (same host) or "
            "'rdma', or send fewer images per request")

    @staticmethod
    def _invalid(it: _Item, exc: InvalidImageError) -> RequestError:
        problem = _OBJECT_REPR.sub("the data", exc.problem)
        return RequestError(_INVALID, f"item {it.index}: {problem}")

    def _admit(self, proc: Processor, it: _Item, dtype: str, shm_ok: bool, inline_budget: int,
               outcome: Outcome, timer: Timer) -> None:
        """Reads the item's header and sizes its output (nothing decoded, nothing allocated),
        then refuses it when the request's outputs would pass --max-output-mb or when it could
        only go inline and does not fit the message."""
        t0 = time.perf_counter()
        try:
            planned = proc.plan_batch(it.data, dtype)
        except InvalidImageError as exc:
            raise self._invalid(it, exc) from None
        timer.decode += time.perf_counter() - t0
        nbytes = planned.nbytes
        total = outcome.output_bytes + nbytes
        try:
            if total > self.config.max_output_bytes:
                raise RequestError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"item {it.index}: the request's outputs would be {total / 2**20:.1f} MiB, "
                    f"over this server's limit of {self.config.max_output_mb} MiB per request "
                    "(--max-output-mb): send fewer or smaller images per request")
            if not self._rdma_possible(nbytes, outcome.transport) and nbytes > inline_budget:
                if not self._to_shm(nbytes, shm_ok):
                    refused = outcome.shm_refused if nbytes >= self.config.shm_min_bytes else ""
                    self._inline_fits(nbytes, inline_budget, refused)  # over budget: raises
                # Too big for inline and shm has no room now: refuse before decoding (the
                # creation after the decode stays the authority, for races either way).
                over = self.registry.would_fit(nbytes, outcome.caller)
                if over:
                    self._inline_fits(nbytes, inline_budget, f"shm_{over}")  # raises
        except RequestError:
            planned.close()
            raise
        outcome.output_bytes = total
        it.planned = planned

    def _rdma_possible(self, nbytes: int, transport: str) -> bool:
        exporter = self.rdma.exporter if self.rdma.ready else None
        return (transport == "rdma" and exporter is not None
                and self.config.rdma_min_bytes <= nbytes <= exporter.max_payload)

    def _prepare(self, proc: Processor, it: _Item, dtype: str, timer: Timer) -> Any:
        """Decodes the item _admit planned."""
        t0 = time.perf_counter()
        planned, it.planned = it.planned, None
        try:
            batch = planned.decode()
        except InvalidImageError as exc:
            raise self._invalid(it, exc) from None
        dt = time.perf_counter() - t0
        timer.decode += dt
        self.metrics.decode_seconds.observe(dt)
        return batch

    def _to_shm(self, nbytes: int, shm_ok: bool) -> bool:
        return shm_ok and nbytes >= self.config.shm_min_bytes

    def _deliver(self, nbytes: int, shm_ok: bool, inline_budget: int, outcome: Outcome) -> str:
        if self._to_shm(nbytes, shm_ok):
            return "shm"
        refused = outcome.shm_refused if nbytes >= self.config.shm_min_bytes else ""
        self._inline_fits(nbytes, inline_budget, refused)
        return "inline"

    def _inline_fits(self, nbytes: int, inline_budget: int, refused: str) -> None:
        """Raises unless nbytes fit in the response; counts an item that wanted shm."""
        if nbytes <= inline_budget:
            if refused:
                self._count_shm_fallback(refused)
            return
        if not refused:
            raise self._too_big(self.config.max_message_bytes - inline_budget + nbytes)
        if refused == "shm_namespace":
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               "transport 'shm' needs the request's shm_namespace to equal the "
                               "server's (GetModelInfo.shm_namespace: the caller must see the "
                               "server's /dev/shm), and the tensor is too large to send inline")
        why = {"shm_cap": "the server's unread shm bytes are at --shm-max-outstanding-mb",
               "shm_share": "this connection holds its share (a quarter) of the server's unread "
                            "shm bytes: read or unlink delivered segments first",
               "shm_full": f"{self.registry.directory} is full"}[refused]
        raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"no shm room for a {nbytes}-byte tensor ({why}), and it is too "
                           "large to send inline")

    def _count_shm_fallback(self, reason: str) -> None:
        self.metrics.fallbacks.labels(reason, "inline").inc()
        if reason not in self._shm_warned:
            self._shm_warned.add(reason)
            log.warning("shm: item sent inline instead (%s); counted in "
                        "smg_fast_fallback_total", reason)

    def _new_segment(self, nbytes: int, fill: Any, outcome: Outcome) -> tuple[str | None, str]:
        """(name, "") of a delivered segment written by fill(), or (None, why) when shm has no
        room for it: "shm_cap" (--shm-max-outstanding-mb), "shm_share" (the caller's share of
        it), "shm_full" (the tmpfs itself)."""
        try:
            name = self.registry.write(nbytes, fill, caller=outcome.caller)
        except ShmQuotaError as exc:
            return None, f"shm_{exc.reason}"
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.ENOMEM, errno.EDQUOT):
                raise
            return None, "shm_full"
        outcome.segments.append(name)
        return name, ""

    def _uncached(self, proc: Processor, it: _Item, dtype: str, shm_ok: bool, out: Any,
                  timer: Timer, inline_budget: int, outcome: Outcome) -> int:
        self._admit(proc, it, dtype, shm_ok, inline_budget, outcome, timer)
        batch = self._prepare(proc, it, dtype, timer)
        reason = ""
        if outcome.transport == "rdma":
            t0 = time.perf_counter()
            lease, reason = self.rdma.lease(batch.nbytes)
            desc = None
            if lease is not None:
                try:
                    batch.write_into(lease.array(batch.np_dtype))
                    t1 = time.perf_counter()
                    desc = lease.commit()
                except ExportRefused as exc:  # the lease vanished meanwhile: fall back below
                    lease.abort()
                    reason = exc.reason
                except BaseException:
                    lease.abort()
                    raise
            if lease is not None and desc is not None:
                outcome.leases.append(lease.key)
                self._set_remote(out.pixel_values, desc, batch.shape, dtype)
                self._finish_item(out, "rdma", batch.grid[0], int(batch.num_tokens[0]), False,
                                  batch.nbytes, t1 - t0, time.perf_counter() - t1, timer)
                return inline_budget
        kind = self._deliver(batch.nbytes, shm_ok, inline_budget, outcome)
        t0 = time.perf_counter()
        name = None
        if kind == "shm":
            spent = [0.0]

            def fill(seg: Any) -> None:
                t1 = time.perf_counter()
                batch.write_into(seg.array(batch.np_dtype))
                spent[0] = time.perf_counter() - t1

            name, why = self._new_segment(batch.nbytes, fill, outcome)
            if name is None:  # no room in shm: inline when it fits
                self._inline_fits(batch.nbytes, inline_budget, why)
                kind = "inline"
        if reason:
            self._count_fallback(reason, kind)
        if name is not None:
            total = time.perf_counter() - t0
            pre, tr = spent[0], total - spent[0]
            self._set_shm(out.pixel_values, name, batch.shape, dtype, batch.nbytes)
        else:
            flat = _native.pooled_empty(batch.nbytes).view(batch.np_dtype)
            px = batch.write_into(flat)
            t1 = time.perf_counter()
            self._set_inline(out.pixel_values, px, dtype)
            pre, tr = t1 - t0, time.perf_counter() - t1
            inline_budget -= batch.nbytes
        self._finish_item(out, kind, batch.grid[0], int(batch.num_tokens[0]), False,
                          batch.nbytes, pre, tr, timer)
        return inline_budget

    def _cached(self, proc: Processor, fingerprint: str, it: _Item, dtype: str, shm_ok: bool,
                out: Any, timer: Timer, inline_budget: int, outcome: Outcome,
                ticket: Ticket) -> int:
        assert self.cache is not None
        # Before the lookup: a hit counts towards the request's output too, and a refusal here
        # is this request's own, never handed to the waiters of a computation.
        self._admit(proc, it, dtype, shm_ok, inline_budget, outcome, timer)
        computed = [0.0]  # a miss's write

        def compute() -> CacheEntry:
            ticket.check()  # also after a waiter's timeout: a late takeover does no work
            batch = self._prepare(proc, it, dtype, timer)
            t1 = time.perf_counter()
            g = batch.grid[0]
            grid = (int(g[0]), int(g[1]), int(g[2]))
            # Always the server's private memory, never a segment's pages: whoever receives a
            # segment can write or truncate it, and later hits must not return that. An shm
            # delivery copies the entry into its segment (7-13 ms for 1080p float32 here).
            flat = _native.pooled_empty(batch.nbytes).view(batch.np_dtype)
            px = batch.write_into(flat)
            computed[0] = time.perf_counter() - t1
            return CacheEntry(px, grid, int(batch.num_tokens[0]))

        t0 = time.perf_counter()
        wait = self.config.single_flight_wait_s
        left = ticket.remaining()
        if left is not None:
            wait = max(0.0, min(wait, left))
        try:
            entry, how = self.cache.get_or_compute(cache_key(it.digest, fingerprint, dtype),
                                                   compute, wait, personal=(StoppedError,))
        except RequestError as exc:
            # A coalesced wait receives the computing request's error: name our own item.
            msg = exc.message
            if msg.startswith("item ") and ":" in msg:
                msg = f"item {it.index}:" + msg.split(":", 1)[1]
            raise RequestError(exc.code, msg) from None
        waited = time.perf_counter() - t0
        if it.planned is not None:  # a hit: the header was all this item needed
            it.planned.close()
            it.planned = None
        pre = computed[0] if how == "miss" else waited
        reason = ""
        if outcome.transport == "rdma":
            t1 = time.perf_counter()
            desc, reason = self.rdma.export_array(entry.pixels)
            if desc is not None:
                outcome.leases.append(desc.key)
                self._set_remote(out.pixel_values, desc, entry.pixels.shape, dtype)
                self._finish_item(out, "rdma", entry.grid, entry.num_tokens, how != "miss",
                                  entry.nbytes, pre, time.perf_counter() - t1, timer)
                return inline_budget
        kind = self._deliver(entry.nbytes, shm_ok, inline_budget, outcome)
        t1 = time.perf_counter()
        name = None
        if kind == "shm":
            src = entry.pixels.reshape(-1).view(np.uint8)

            def fill(seg: Any) -> None:
                seg.array(np.uint8)[:] = src

            name, why = self._new_segment(entry.nbytes, fill, outcome)
            if name is None:  # no room in shm: inline when it fits
                self._inline_fits(entry.nbytes, inline_budget, why)
                kind = "inline"
        if reason:
            self._count_fallback(reason, kind)
        if name is not None:
            self._set_shm(out.pixel_values, name, entry.pixels.shape, dtype, entry.nbytes)
        else:
            self._set_inline(out.pixel_values, entry.pixels, dtype)
            inline_budget -= entry.nbytes
        tr = time.perf_counter() - t1
        self._finish_item(out, kind, entry.grid, entry.num_tokens, how != "miss", entry.nbytes,
                          pre, tr, timer)
        return inline_budget

    @staticmethod
    def _set_shm(td: Any, name: str, shape: tuple[int, ...], dtype: str, nbytes: int) -> None:
        td.shape.extend(int(s) for s in shape)
        td.dtype = dtype
        td.shm.CopyFrom(tensor_pb2.ShmHandle(name=name, offset=0, nbytes=nbytes,
                                             owner_id=owner_id()))

    def _count_fallback(self, reason: str, used: str) -> None:
        self.metrics.fallbacks.labels(reason, used).inc()
        self.rdma.note_fallback(reason, used)

    @staticmethod
    def _set_remote(td: Any, desc: Descriptor, shape: tuple[int, ...], dtype: str) -> None:
        td.shape.extend(int(s) for s in shape)
        td.dtype = dtype
        td.remote.CopyFrom(tensor_pb2.RemoteTensorHandle(
            transport=RDMA_TRANSPORT, descriptor=desc.encode(), nbytes=desc.nbytes))

    @staticmethod
    def _set_inline(td: Any, px: np.ndarray, dtype: str) -> None:
        td.shape.extend(int(s) for s in px.shape)
        td.dtype = dtype
        td.inline = px.tobytes()

    def _finish_item(self, out: Any, kind: str, grid: Any, tokens: int, hit: bool, nbytes: int,
                     pre: float, tr: float, timer: Timer) -> None:
        out.grid_thw.extend(int(v) for v in grid)
        out.num_tokens = tokens
        out.cache_hit = hit
        out.transport = kind
        timer.preprocess += pre
        timer.transport += tr
        self.metrics.preprocess_seconds.observe(pre)
        self.metrics.transport_seconds.labels(kind).observe(tr)
        self.metrics.bytes_out.labels(kind).inc(nbytes)
