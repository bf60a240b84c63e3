"""Delivery.

Where one item's tensor goes (an RDMA slot, a /dev/shm segment or the response itself), chosen
before it is written so that it is written exactly once, with counted fallbacks when the chosen
transport has no room; and what a request that fails leaves behind (unlinked, freed)."""

from __future__ import annotations

import errno
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from .._proto import tensor_pb2
from .._service.wire import CALLER_KEY
from ..transport.rdma import TRANSPORT as RDMA_TRANSPORT
from ..transport.rdma import Descriptor, ExportRefused
from ..transport.shm import ShmQuotaError, ShmRegistry, owner_id
from .config import ServerConfig
from .metrics import Metrics
from .rdma_lane import RdmaLane
from .request_error import RequestError
from .shm_shares import CONNECTION, ROUTED, UNTRUSTED
from .tensor import Tensor
from .video_items import set_video_info

log = logging.getLogger("smg_fast.server")

OVERHEAD = 64 * 1024  # response bytes besides the tensors (grids, hashes, framing), generous
# Whose share of unread shm bytes is full, as the request's share was chosen (shm_shares.py).
_OWN_SHARE_FULL = ("this connection holds its share (a quarter) of the server's unread shm "
                   "bytes: read or unlink delivered segments first")
_SHARE_FULL = {
    "": _OWN_SHARE_FULL,
    CONNECTION: _OWN_SHARE_FULL,
    ROUTED: "the router's caller this request comes from holds its share (a quarter) of this "
            "server's unread shm bytes (a trusted router's callers each have one): that caller "
            "must read or unlink its delivered segments first",
    UNTRUSTED: "the connection this request came on holds its share (a quarter) of the "
               f"server's unread shm bytes; it named a caller ({CALLER_KEY} metadata, as a "
               "router does) but its address is not a --trusted-router-peer of this server, "
               "so all the callers it forwards for count against that one share: read or "
               "unlink delivered segments first, or start the server trusting the router",
}


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
    caller: str = ""  # whose share of unread shm bytes this request's segments count against
    share: str = ""  # how that was chosen (shm_shares.CONNECTION, ROUTED, UNTRUSTED)
    rdma_caller: str = ""  # whose share of RDMA slots (shm_shares.rdma_caller)
    shm_refused: str = ""  # why a request that asked for shm may not have it
    output_bytes: int = 0  # planned output of the items admitted so far
    shm_bytes: int = 0  # of which planned to go by shm


class Delivery:
    """The transports of one server: the shm registry, the RDMA lane, the response's budget."""

    def __init__(self, config: ServerConfig, registry: ShmRegistry, rdma: RdmaLane,
                 metrics: Metrics) -> None:
        self.config = config
        self.registry = registry
        self.rdma = rdma
        self.metrics = metrics
        self._shm_warned: set[str] = set()

    # ---- before anything is decoded ----

    def check_room(self, nbytes: int, shm_ok: bool, inline_budget: int,
                   outcome: Outcome) -> str:
        """The transport a tensor of nbytes is planned for ("rdma", "shm" or "inline").

        It accounts for what the request's earlier items already planned. Raises RequestError when
        it could go nowhere: too big for what is left of the response, and no other transport has
        room. The check after computing stays the authority: room may come or go meanwhile."""
        if self._rdma_possible(nbytes, outcome.transport):
            return "rdma"
        if not self._to_shm(nbytes, shm_ok):
            if nbytes > inline_budget:
                refused = outcome.shm_refused if nbytes >= self.config.shm_min_bytes else ""
                self._inline_fits(nbytes, inline_budget, refused, outcome)  # over budget: raises
            return "inline"
        need = self.registry.footprint(nbytes)  # what it takes in the tmpfs (a reused slab)
        over = self.registry.would_fit(outcome.shm_bytes + need, outcome.caller)
        if not over:
            outcome.shm_bytes += need
            return "shm"
        if nbytes > inline_budget:
            self._inline_fits(nbytes, inline_budget, f"shm_{over}", outcome)  # raises
        return "inline"  # no shm room for it: it will fall back inline

    # ---- the one delivery step ----

    def deliver(self, t: Tensor, dtype: str, shm_ok: bool, out: Any, timer: Timer,
                inline_budget: int, outcome: Outcome, pre: float = 0.0) -> int:
        """Puts t where it goes and fills the response item ``out``.

        Returns what is left of the inline budget. ``pre``: time already spent computing t (a cache
        miss, a wait)."""
        reason = ""
        if outcome.transport == "rdma":
            t0 = time.perf_counter()
            desc, reason, wrote = self._to_rdma(t, outcome.rdma_caller)
            if desc is not None:
                outcome.leases.append(desc.key)
                self._set_remote(out.pixel_values, desc, t.shape, dtype)
                self._finish(out, t, "rdma", pre + wrote,
                             time.perf_counter() - t0 - wrote, timer)
                return inline_budget
            pre += wrote  # a write into a lease lost after it is still computing time
        kind = self._choose(t.nbytes, shm_ok, inline_budget, outcome)
        t0 = time.perf_counter()
        name = None
        wrote = 0.0
        if kind == "shm":
            def fill(seg: Any) -> None:
                nonlocal wrote
                t1 = time.perf_counter()
                t.write(seg.array(t.np_dtype))
                wrote = time.perf_counter() - t1

            name, offset, why = self._new_segment(t.nbytes, fill, outcome)
            if name is None:  # no room in shm: inline when it fits
                self._inline_fits(t.nbytes, inline_budget, why, outcome)
                kind = "inline"
        if reason:
            self._count_fallback(reason, kind)
        if name is not None:
            self._set_shm(out.pixel_values, name, offset, t.shape, dtype, t.nbytes)
        else:
            computing = t.pixels is None
            px = t.array()
            wrote = time.perf_counter() - t0 if computing else 0.0
            self._set_inline(out.pixel_values, px, dtype)
            inline_budget -= t.nbytes
        if t.batch is None:  # copying a computed tensor in is transport, not preprocessing
            wrote = 0.0
        self._finish(out, t, kind, pre + wrote, time.perf_counter() - t0 - wrote, timer)
        return inline_budget

    def split_decode(self, t: Tensor, seconds: float, timer: Timer) -> float:
        """The seconds spent computing t, less the decoding they included.

        When t was decoded while it was computed, that time is counted as decoding instead."""
        if t.decoded is None:
            return seconds
        timer.decode += t.decoded
        self.metrics.decode_seconds.observe(t.decoded)
        return max(0.0, seconds - t.decoded)

    def release(self, outcome: Outcome) -> None:
        """Unlinks the segments and frees the slots of a request that will not be answered."""
        for name in outcome.segments:
            self.registry.release(name)
        outcome.segments.clear()
        for key in outcome.leases:
            self.rdma.free(key)
        outcome.leases.clear()

    def too_big(self, nbytes: int) -> RequestError:
        limit = self.config.max_message_bytes
        return RequestError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"response would be about {nbytes / 2**20:.1f} MiB, over the "
            f"{limit / 2**20:.0f} MiB message limit: request transport 'shm' (same host) or "
            "'rdma', or send fewer images per request")

    # ---- the transports ----

    def _to_rdma(self, t: Tensor, caller: str) -> tuple[Descriptor | None, str, float]:
        """Writes t for an RDMA pull in a slot of caller's share, or says why it falls back.

        Returns (descriptor, "", seconds spent writing) or (None, fallback reason, seconds spent on
        a write whose lease was then lost, else 0)."""
        if t.batch is None:  # a computed tensor: the lane copies it in, GIL released
            desc, reason = self.rdma.export_array(t.array(), caller)
            return desc, reason, 0.0
        lease, reason = self.rdma.lease(t.nbytes, caller)
        if lease is None:
            return None, reason, 0.0
        try:
            t0 = time.perf_counter()
            t.write(lease.array(t.np_dtype))
            wrote = time.perf_counter() - t0
            return lease.commit(), "", wrote
        except ExportRefused as exc:  # the lease vanished meanwhile: fall back
            lease.abort()
            return None, exc.reason, time.perf_counter() - t0
        except BaseException:
            lease.abort()
            raise

    def _rdma_possible(self, nbytes: int, transport: str) -> bool:
        exporter = self.rdma.exporter if self.rdma.ready else None
        return (transport == "rdma" and exporter is not None
                and self.config.rdma_min_bytes <= nbytes <= exporter.max_payload)

    def _to_shm(self, nbytes: int, shm_ok: bool) -> bool:
        return shm_ok and nbytes >= self.config.shm_min_bytes

    def _choose(self, nbytes: int, shm_ok: bool, inline_budget: int, outcome: Outcome) -> str:
        if self._to_shm(nbytes, shm_ok):
            return "shm"
        refused = outcome.shm_refused if nbytes >= self.config.shm_min_bytes else ""
        self._inline_fits(nbytes, inline_budget, refused, outcome)
        return "inline"

    def _inline_fits(self, nbytes: int, inline_budget: int, refused: str,
                     outcome: Outcome) -> None:
        """Raises unless nbytes fit in the response; counts an item that wanted shm."""
        if nbytes <= inline_budget:
            if refused:
                self._count_shm_fallback(refused)
            return
        if not refused:
            raise self.too_big(self.config.max_message_bytes - inline_budget + nbytes)
        if refused == "shm_namespace":
            raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                               "transport 'shm' needs the request's shm_namespace to equal the "
                               "server's (GetModelInfo.shm_namespace: the caller must see the "
                               "server's /dev/shm), and the tensor is too large to send inline")
        why = {"shm_cap": "the server's unread shm bytes are at --shm-max-outstanding-mb",
               "shm_share": _SHARE_FULL[outcome.share],
               "shm_full": f"{self.registry.directory} is full",
               "shm_fds": "the server is out of file descriptors"}[refused]
        raise RequestError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                           f"no shm room for a {nbytes}-byte tensor ({why}), and it is too "
                           "large to send inline", retryable=True)  # room comes back

    def _new_segment(self, nbytes: int, fill: Any,
                     outcome: Outcome) -> tuple[str | None, int, str]:
        """Writes a delivered segment with fill(), when shm has room for it.

        Returns (name, offset, "") of the segment (reused when the registry reuses them:
        offset > 0), or (None, 0, why) when shm has no room for it: "shm_cap"
        (--shm-max-outstanding-mb), "shm_share" (the caller's share of it), "shm_full" (the tmpfs
        itself), "shm_fds" (no file descriptor left)."""
        try:
            name, offset = self.registry.deliver(nbytes, fill, caller=outcome.caller)
        except ShmQuotaError as exc:
            return None, 0, f"shm_{exc.reason}"
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                return None, 0, "shm_fds"
            if exc.errno not in (errno.ENOSPC, errno.ENOMEM, errno.EDQUOT):
                raise
            return None, 0, "shm_full"
        outcome.segments.append(name)
        return name, offset, ""

    # ---- counting and the response ----

    def _count_shm_fallback(self, reason: str) -> None:
        self.metrics.fallbacks.labels(reason, "inline").inc()
        if reason not in self._shm_warned:
            self._shm_warned.add(reason)
            log.warning("shm: item sent inline instead (%s); counted in "
                        "smg_fast_fallback_total", reason)

    def _count_fallback(self, reason: str, used: str) -> None:
        self.metrics.fallbacks.labels(reason, used).inc()
        self.rdma.note_fallback(reason, used)

    @staticmethod
    def _set_shm(td: Any, name: str, offset: int, shape: tuple[int, ...], dtype: str,
                 nbytes: int) -> None:
        td.shape.extend(int(s) for s in shape)
        td.dtype = dtype
        td.shm.CopyFrom(tensor_pb2.ShmHandle(name=name, offset=offset, nbytes=nbytes,
                                             owner_id=owner_id()))

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

    def _finish(self, out: Any, t: Tensor, kind: str, pre: float, tr: float,
                timer: Timer) -> None:
        out.grid_thw.extend(int(v) for v in t.grid)
        out.num_tokens = t.num_tokens
        out.cache_hit = t.hit
        out.transport = kind
        if t.video is not None:
            set_video_info(out.video, t.video)
        pre = self.split_decode(t, pre, timer)
        timer.preprocess += pre
        timer.transport += tr
        self.metrics.preprocess_seconds.observe(pre)
        self.metrics.transport_seconds.labels(kind).observe(tr)
        self.metrics.bytes_out.labels(kind).inc(t.nbytes)
