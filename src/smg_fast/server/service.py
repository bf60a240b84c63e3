"""The Preprocess work itself, run in a worker thread.

Parse, validate, decode, preprocess (through the pixel cache when on), deliver each tensor inline,
in /dev/shm or to an RDMA slot, serialize. A video item goes the same way (video_items.py):
planned from its header, admitted on its planned size, decoded while it is written.

Every failure becomes a RequestError carrying its gRPC status; every shm segment created for a
request that then fails is unlinked before the error leaves. A Ticket from the handler stops the
work between items once the RPC is cancelled, its deadline passes or the drain cuts it.
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess
import time
import traceback
from dataclasses import dataclass
from typing import Any

import grpc
from blake3 import blake3
from google.protobuf.message import DecodeError

from .._dtypes import parse_dtype
from .._proto import preprocessor_pb2 as pb
from .._service.wire import MAX_ITEMS, too_many_items
from ..errors import (
    CompactFormatError,
    InvalidImageError,
    InvalidVideoError,
    UnsupportedCallError,
)
from ..processors.video import PlannedVideo
from ..transport.shm import ShmRegistry
from .cache import CacheEntry, PixelCache, cache_key
from .config import TRANSPORTS, ServerConfig
from .decode_budget import DecodeBudget
from .delivery import OVERHEAD, Delivery, Outcome, Timer
from .encoding import select
from .inputs import resolve_item
from .metrics import Metrics
from .model_info import model_info
from .models import ModelSet
from .rdma_lane import RdmaLane
from .request_error import DecodeBusyError, RequestError, StoppedError
from .tensor import Tensor
from .ticket import Ticket
from .video_items import video_fingerprint, video_options, video_planner

log = logging.getLogger("smg_fast.server")

_INVALID = grpc.StatusCode.INVALID_ARGUMENT
# Output dtypes a request may ask for (uint8 travels as the codes of encoding "uint8+lut").
WIRE_DTYPES = ("float32", "bfloat16", "float16")
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def _forget(exc: BaseException) -> None:
    """Drops the locals of the frames a failed request's exception went through.

    Those hold a decoded image, an output buffer: the exception may outlive this request (a
    coalesced waiter's, a log record's), its buffers must not."""
    traceback.clear_frames(exc.__traceback__)
    exc.__traceback__ = None


def _exhausted(message: str) -> RequestError:
    """A size limit: the same request can never fit (not retryable)."""
    return RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def _us(seconds: float) -> int:
    return max(0, int(seconds * 1e6))


@dataclass
class _Item:
    index: int
    data: bytes
    digest: bytes
    planned: Any = None  # its PlannedBatch or PlannedVideo (nothing decoded), set by _admit
    plan: Any = None  # () -> a fresh plan of the item (its header read again)


class PreprocessService:
    def __init__(self, config: ServerConfig, models: ModelSet, cache: PixelCache | None,
                 registry: ShmRegistry, metrics: Metrics, namespace: str,
                 rdma: RdmaLane | None = None, decode: DecodeBudget | None = None) -> None:
        self.config = config
        self.decode = decode if decode is not None else DecodeBudget(config.decode_bytes_limit,
                                                                         config.decode_wait_s)
        self.models = models
        self.cache = cache
        self.registry = registry
        self.metrics = metrics
        self.namespace = namespace
        self.rdma = rdma if rdma is not None else RdmaLane(config)
        self.delivery = Delivery(config, registry, self.rdma, metrics)
        self._info = model_info(config, models, namespace,
                                cache.capacity_bytes if cache is not None else 0)

    # ---- GetModelInfo ----

    def model_info(self) -> bytes:
        if not self.rdma.ready:
            return self._info
        extra = pb.GetModelInfoResponse(rdma_available=True,
                                        rdma_max_bytes=self.rdma.exporter.max_payload)
        return self._info + extra.SerializeToString()  # proto3: concatenation merges

    # ---- warm-up ----

    def warm_up(self) -> None:
        """Runs every loaded processor once on a small image (builds LUTs, fills pools)."""
        from ..imaging.sample import sample_image_bytes

        png = sample_image_bytes(96, 64, "PNG")
        for m in self.models.models.values():
            m.proc.prepare(png, "float32").compute()

    # ---- Preprocess ----

    def preprocess(self, raw: bytes, received: float, outcome: Outcome | None = None,
                   ticket: Ticket | None = None) -> Outcome:
        """Serves one request (in a worker thread).

        Fills and returns outcome (its model and transport are set as soon as known, for the
        caller's metrics). Raises RequestError only, and a fresh one: its traceback does not reach
        the frames (and the big buffers) of the work that failed."""
        outcome = Outcome(b"") if outcome is None else outcome
        try:
            return self._serve(raw, received, outcome, Ticket() if ticket is None else ticket)
        except RequestError as exc:
            err = RequestError(exc.code, exc.message, exc.retryable)
            _forget(exc)
        except MemoryError as exc:
            err = RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               "the server ran out of memory for this request: retry later "
                               "with backoff, or send fewer or smaller images", retryable=True)
            _forget(exc)
        except OverflowError as exc:  # a numeric request field past what the math can hold
            err = RequestError(_INVALID, f"a numeric value in the request is out of range "
                                         f"({_OBJECT_REPR.sub('the data', str(exc))})")
            _forget(exc)
        except subprocess.SubprocessError as exc:  # an external decoder failed on the data
            err = RequestError(_INVALID, "cannot decode the image: its decoder failed")
            _forget(exc)
        except Exception as exc:
            # shut down under us (the registry's files may be gone mid-write: an OSError)
            if isinstance(exc, (RuntimeError, OSError)) and self.registry.closed:
                log.info("request ended by the shutdown: %s: %s", type(exc).__name__, exc)
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
            if dtype not in WIRE_DTYPES:  # uint8 is the library's, not yet the wire's
                raise ValueError(dtype)
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
        proc, fingerprint = self.models.variant(model, min_px, max_px)
        try:  # the compact format computes, caches and delivers the uint8 codes
            dtype, compact = select(req.encoding, dtype, proc)
        except CompactFormatError as exc:
            raise RequestError(_INVALID, str(exc)) from None
        except ValueError:
            raise RequestError(_INVALID, f"unknown encoding {req.encoding!r}: use "
                                         "'uint8+lut' or '' for the plain dtype") from None
        try:  # a family computes some dtypes only (Phi-4-multimodal: float32)
            proc.pipeline(dtype)
        except UnsupportedCallError as exc:
            raise RequestError(_INVALID, str(exc)) from None
        if not req.items:
            raise RequestError(_INVALID, "request has no items")
        if len(req.items) > MAX_ITEMS:
            raise RequestError(_INVALID, too_many_items(len(req.items)))
        videos = [i for i, item in enumerate(req.items) if item.HasField("video")]
        if videos and compact is not None:
            raise RequestError(_INVALID, f"item {videos[0]}: encoding 'uint8+lut' is for images; "
                                         "send videos in a request without it")
        video_proc = self.models.video(model) if videos else None
        shm_ok, outcome.shm_refused = self._shm_allowed(requested, req.shm_namespace)
        resp = pb.PreprocessResponse(request_id=req.request_id)
        timer = Timer()
        inline_budget = planned_budget = self.config.max_message_bytes - OVERHEAD
        items: list[_Item] = []
        held = 0  # decode memory the item being decoded holds in the decode budget
        try:
            # First every item's bytes and header: the whole request's output is sized, and
            # refused when it cannot be served, before any pixel is decoded.
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
                        raise _exhausted(f"item {index}: the request's URLs resolve to more "
                                         f"than {self.config.max_message_mb} MiB "
                                         "(--max-message-mb): send fewer per request")
                it = _Item(index, data, blake3(data).digest())
                if item.HasField("video"):
                    it.plan = video_planner(video_proc, index, data,
                                            video_options(index, item.video), dtype, ticket.check)
                else:
                    it.plan = functools.partial(proc.plan_batch, data, dtype)
                items.append(it)
                timer.decode += time.perf_counter() - t0
                planned_budget = self._admit(it, shm_ok, planned_budget, outcome, timer)
            raw = req = None  # the message is no longer needed: its bytes are in items
            for it in items:
                ticket.check()
                out = resp.items.add(content_hash=it.digest)
                if self.cache is None:
                    # decoded by the delivery when it computes while decoding: held till then
                    held = self._take_decode(it, ticket)
                    tensor, pre = self._uncached(it, timer), 0.0
                else:
                    tensor, pre = self._cached(fingerprint, it, dtype, timer, ticket)
                try:
                    inline_budget = self.delivery.deliver(tensor, dtype, shm_ok, out, timer,
                                                          inline_budget, outcome, pre)
                except (InvalidImageError, InvalidVideoError) as exc:  # decoded as written
                    raise self._invalid(it, exc) from None
                if held:
                    self.decode.give(held)
                    held = 0
                if compact is not None:
                    compact.stamp(out.pixel_values)
                tensor = it.data = it.plan = None  # done with this item's buffers
            resp.timings.queue_us = _us(start - received)
            resp.timings.decode_us = _us(timer.decode)
            resp.timings.preprocess_us = _us(timer.preprocess)
            resp.timings.transport_us = _us(timer.transport)
            resp.timings.total_us = _us(time.perf_counter() - received)
            payload = resp.SerializeToString()
            if len(payload) > self.config.max_message_bytes:
                raise self.delivery.too_big(len(payload))
            outcome.payload = payload
            return outcome
        except BaseException as exc:
            self.delivery.release(outcome)
            for it in items:  # headers planned but never decoded
                if it.planned is not None:
                    it.planned.close()
            # The caller keeps the exception (in a future, in a reference cycle through its
            # traceback): drop what this request built (inline tensors, decoded images) now,
            # not at the next garbage collection. Line numbers stay for the log.
            raw = req = resp = out = it = items = data = payload = tensor = None  # noqa: F841
            traceback.clear_frames(exc.__traceback__)
            raise
        finally:
            if held:
                self.decode.give(held)

    def _take_decode(self, it: _Item, ticket: Ticket) -> int:
        """Takes the item's planned decode memory from the decode budget, or refuses it.

        Waits its turn, up to --decode-wait-s and the request's deadline. Returns what it holds."""
        nbytes = getattr(it.planned, "decode_bytes", 0)  # from the header: an image or a video
        if not nbytes:
            return 0
        left = ticket.remaining()
        if not self.decode.take(nbytes, None if left is None else max(0.0, left)):
            ticket.check()  # its deadline passed, or it was cut, meanwhile
            raise DecodeBusyError(self.decode.busy_message(it.index, nbytes))
        try:
            ticket.check()  # cut while it waited its turn: decode nothing for nobody
        except BaseException:
            self.decode.give(nbytes)
            raise
        return nbytes

    def release(self, outcome: Outcome) -> None:
        """Unlinks the segments and frees the slots of a request that will not be answered."""
        self.delivery.release(outcome)

    def _shm_allowed(self, requested: str, namespace: str) -> tuple[bool, str]:
        """Whether items may go by shm.

        Only to a caller that sees the server's /dev/shm (its shm_namespace equals ours); and, for a
        request that asked for shm, why not."""
        if requested == "inline":
            return False, ""
        if namespace == self.namespace:
            return True, ""
        return False, "shm_namespace" if requested == "shm" else ""  # auto/rdma: inline

    @staticmethod
    def _invalid(it: _Item, exc: InvalidImageError | InvalidVideoError) -> RequestError:
        return RequestError(_INVALID, f"item {it.index}: {exc.problem}")  # media names inputs

    def _admit(self, it: _Item, shm_ok: bool, inline_budget: int, outcome: Outcome,
               timer: Timer) -> int:
        """Admits an item on its header alone, or refuses it.

        Reads the item's header and sizes its output (nothing decoded, nothing allocated), then
        refuses it when the request's outputs would pass --max-output-mb or when it could only go
        inline and does not fit what is left of the message (returned)."""
        t0 = time.perf_counter()
        try:
            planned = it.plan()
        except (InvalidImageError, InvalidVideoError) as exc:
            raise self._invalid(it, exc) from None
        timer.decode += time.perf_counter() - t0
        nbytes = planned.nbytes
        total = outcome.output_bytes + nbytes
        try:
            if total > self.config.max_output_bytes:
                raise _exhausted(f"item {it.index}: the request's outputs would be "
                                 f"{total / 2**20:.1f} MiB, over this server's limit of "
                                 f"{self.config.max_output_mb} MiB per request "
                                 "(--max-output-mb): send fewer or smaller images (or "
                                 "fewer video frames) per request")
            kind = self.delivery.check_room(nbytes, shm_ok, inline_budget, outcome)
        except RequestError:
            planned.close()
            raise
        outcome.output_bytes = total
        it.planned = planned
        return inline_budget - nbytes if kind == "inline" else inline_budget

    def _prepare(self, it: _Item, timer: Timer) -> Any:
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

    def _uncached(self, it: _Item, timer: Timer) -> Tensor:
        """The item's tensor, to be computed into its destination.

        Decoded there too when the planned batch decodes while it computes (one JPEG: its decode
        overlaps its resize, and a decode error surfaces from the write, after the destination was
        taken, which the write's or the request's failure path gives back), else decoded here first.
        """
        planned = it.planned
        if planned.decodes_while_computing:
            return Tensor.of_batch(planned, replan=it.plan)
        return Tensor.of_batch(self._prepare(it, timer))

    def _cached(self, fingerprint: str, it: _Item, dtype: str, timer: Timer,
                ticket: Ticket) -> tuple[Tensor, float]:
        """The item's tensor through the pixel cache, and the time it took.

        A miss computes it, a coalesced wait waits for it."""
        assert self.cache is not None
        computed = 0.0

        def compute() -> CacheEntry:
            nonlocal computed
            ticket.check()  # also after a waiter's timeout: a late takeover does no work
            held = self._take_decode(it, ticket)  # a miss decodes: only it takes the budget
            try:
                planned = it.planned
                overlap = planned is not None and planned.decodes_while_computing
                batch = planned if overlap else self._prepare(it, timer)  # see _uncached
                t1 = time.perf_counter()
                # Always the server's private memory, never a segment's pages: whoever receives
                # a segment can write or truncate it, and later hits must not return that. An
                # shm delivery copies the entry into its segment (7-13 ms for 1080p float32).
                t = Tensor.of_batch(batch)
                try:
                    entry = CacheEntry(t.array(), t.grid, t.num_tokens, t.video)
                except (InvalidImageError, InvalidVideoError) as exc:
                    raise self._invalid(it, exc) from None
                computed = self.delivery.split_decode(t, time.perf_counter() - t1, timer)
                batch = t = None  # the decoded image goes before the budget is given back
            finally:
                if held:
                    self.decode.give(held)
            return entry

        t0 = time.perf_counter()
        wait = self.config.single_flight_wait_s
        left = ticket.remaining()
        if left is not None:
            wait = max(0.0, min(wait, left))
        try:
            if isinstance(it.planned, PlannedVideo):
                fingerprint = video_fingerprint(it.planned)
            entry, how = self.cache.get_or_compute(cache_key(it.digest, fingerprint, dtype),
                                                   compute, wait,
                                                   personal=(StoppedError, DecodeBusyError))
        except RequestError as exc:
            # A coalesced wait receives the computing request's error: name our own item.
            msg = exc.message
            if msg.startswith("item ") and ":" in msg:
                msg = f"item {it.index}:" + msg.split(":", 1)[1]
            raise RequestError(exc.code, msg, exc.retryable) from None
        waited = time.perf_counter() - t0
        if it.planned is not None:  # a hit (the header was all it needed), or consumed: closed
            it.planned.close()
            it.planned = None
        return Tensor.of_entry(entry, how != "miss"), computed if how == "miss" else waited

