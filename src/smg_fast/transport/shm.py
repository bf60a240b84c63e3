"""The registry of this process's shm segments.

Who owns which, the cap on unread bytes, expiry and cleanup. Segments themselves:
:mod:`smg_fast.transport.shm_segment`; names, producer liveness and the sweeper:
:mod:`smg_fast.transport.shm_owner`. This module also gathers the public shm names in one place
(``smg_fast.shm`` is its deprecated old path).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import shm_segment
from .errors import ShmNameError, ShmQuotaError
from .shm_owner import (  # noqa: F401  (_NAME_RE, _pidns_tag: used by tests)
    _NAME_RE,
    SHM_DIR,
    SHM_PREFIX,
    _pidns_tag,
    _unlink_quiet,
    check_shm_name,
    is_segment_name,
    owner_id,
    shm_namespace,
    sweep_dead_segments,
)
from .shm_pool import SegmentPool
from .shm_reuse import HEADER, Slab, SlabPool
from .shm_segment import ShmSegment, create_segment, default_outstanding_cap, tmpfs_bytes

log = logging.getLogger("smg_fast.shm")


@dataclass
class _Owned:
    born: float
    nbytes: int
    caller: str
    slab: Slab | None = None  # a reused segment (its file stays open here)


class ShmRegistry:
    """Creates segments and remembers the ones this process still owns.

    A segment is owned from ``publish`` (its bytes are counted from ``create``) until the
    consumer unlinks it (``prune`` notices) or the producer gives it up (``release``, on a
    failure path); an unpublished one has no name, and vanishes with its descriptor. ``close``
    at shutdown removes whatever is left. ``ttl_s`` > 0: ``prune`` also unlinks segments
    nobody read in that time.
    ``pool_bytes`` > 0: segments come from a :class:`~smg_fast.transport.shm_pool.SegmentPool` of
    pre-faulted ones when it has one of the right size (its budget at most a quarter of the
    tmpfs). With ``reuse`` as well, ``deliver`` hands out reused segments instead (see
    :mod:`smg_fast.transport.shm_reuse`; the budget then bounds the idle ones), at offset
    ``HEADER``: a consumer releases one by unlinking its name and closing or unmapping it. A
    delivery the slab pool declines (its open-slab cap, no descriptors) gets a new file.

    ``max_outstanding_bytes`` > 0 caps the bytes of owned (unread) segments (what they take
    in the tmpfs: a reused one's whole slab, ``footprint``), and
    ``share_bytes`` > 0 the part of them one caller (``create``'s ``caller``) may hold:
    a creation over either raises :class:`ShmQuotaError` (after a prune, to count the reads
    consumers made since the last one: of every segment over the cap, of the caller's over its
    share, each at most once per ``PRESSURE_PRUNE_S``, so that a caller holding many segments
    costs a bounded number of lstat calls).
    """

    PRESSURE_PRUNE_S = 0.01

    def __init__(self, directory: str = SHM_DIR, ttl_s: float = 0.0,
                 pool_bytes: int = 0, *, max_outstanding_bytes: int = 0,
                 share_bytes: int = 0, reuse: bool = False) -> None:
        self.directory = directory
        self.ttl_s = float(ttl_s)
        self.max_outstanding_bytes = int(max_outstanding_bytes)
        self.share_bytes = int(share_bytes)
        self.pool = None
        size = tmpfs_bytes(directory)
        if size > 0:  # ready segments take tmpfs room from delivered ones: at most a quarter
            pool_bytes = min(pool_bytes, size // 4)
        self.slabs: SlabPool | None = None
        if reuse and pool_bytes > 0:
            try:
                self.slabs = SlabPool(pool_bytes, directory)
            except OSError as exc:
                log.warning("shm: segments cannot be reused in %s (%s): every shm response "
                            "gets a new file", directory, exc)
        if pool_bytes > 0 and self.slabs is None:
            self.pool = SegmentPool(pool_bytes, directory)
        self._owned: dict[str, _Owned] = {}
        self._lock = threading.Lock()
        self._bytes = 0  # owned segments + reservations of ones being made
        self._by_caller: dict[str, int] = {}
        self._pruned_at: dict[str | None, float] = {}  # caller (None: all) -> last pressure prune
        self.created = 0
        self.closed = False
        self.expired = 0
        self.released = 0
        self.refused = 0

    def footprint(self, nbytes: int) -> int:
        """The bytes a delivered nbytes tensor counts against the limits.

        Its slab's size when segments are reused, else nbytes."""
        return self.slabs.size_class(nbytes) if self.slabs is not None else int(nbytes)

    @property
    def outstanding_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def create(self, nbytes: int, caller: str = "") -> ShmSegment:
        """An unpublished segment of nbytes, its bytes reserved against the caller's limits.

        Raises :class:`ShmQuotaError` otherwise. Hand it to ``publish`` once written, or to
        ``abandon``: ``write`` does all three."""
        if self.closed:
            raise RuntimeError("shm registry is closed (shutting down)")
        self._reserve(nbytes, caller)
        try:
            seg = self.pool.take(nbytes) if self.pool is not None else None
            if seg is None:
                seg = create_segment(nbytes, self.directory)
        except BaseException:
            self._unreserve(nbytes, caller)
            raise
        return seg

    def publish(self, seg: ShmSegment, caller: str = "") -> str:
        """Names a written segment from ``create`` and returns its name.

        The registry owns it from then on (until its consumer unlinks it, ``release``, the TTL or
        ``close``)."""
        nbytes = seg.nbytes
        try:
            if self.closed:
                raise RuntimeError("shm registry is closed (shutting down)")
            name = seg.publish()
        except BaseException:
            self.abandon(seg, caller)
            raise
        with self._lock:
            if not self.closed:
                self._owned[name] = _Owned(time.monotonic(), nbytes, caller)
                self.created += 1
                return name
            self._forget(nbytes, caller)
        seg.discard()
        raise RuntimeError("shm registry is closed (shutting down)")

    def abandon(self, seg: ShmSegment, caller: str = "") -> None:
        """Drops a segment from ``create`` that will not be published (its reservation too)."""
        self._unreserve(seg.nbytes, caller)
        seg.discard()

    def _over(self, nbytes: int, caller: str) -> str:
        """Which limit a new segment of nbytes would pass ("" = none); lock held."""
        cap = self.max_outstanding_bytes
        if cap > 0 and self._bytes + nbytes > cap:
            return "cap"
        share = self.share_bytes
        if share > 0 and self._by_caller.get(caller, 0) + nbytes > share:
            return "share"
        return ""

    def _over_after_prune(self, nbytes: int, caller: str) -> str:
        """Like ``_over``.

        Over a limit, first counts the reads consumers made since the last pressure prune of that
        scope (at most one per PRESSURE_PRUNE_S)."""
        with self._lock:
            over = self._over(nbytes, caller)
            scope = None if over == "cap" else caller
            now = time.monotonic()
            prune = bool(over) and now - self._pruned_at.get(scope, 0.0) >= self.PRESSURE_PRUNE_S
            if prune:
                self._pruned_at[scope] = now
        if prune:
            self._prune(everyone=scope is None, caller=caller)
        return over

    def would_fit(self, nbytes: int, caller: str = "") -> str:
        """Which limit a segment of nbytes for caller would pass now, if any.

        "" when it would pass neither limit now, else the one it would pass ("cap" or "share").
        Advisory (lets a server refuse work before doing it): ``create`` decides."""
        if not self._over_after_prune(nbytes, caller):
            return ""
        with self._lock:
            return self._over(nbytes, caller)

    def _reserve(self, nbytes: int, caller: str) -> None:
        over = self._over_after_prune(nbytes, caller)
        with self._lock:
            over = self._over(nbytes, caller) if over else ""
            if over:
                self.refused += 1
                held = (self._bytes if over == "cap" else self._by_caller.get(caller, 0))
                limit = self.max_outstanding_bytes if over == "cap" else self.share_bytes
                raise ShmQuotaError(over, f"{held} unread shm bytes held "
                                    f"{'in all' if over == 'cap' else 'by this caller'}; "
                                    f"{nbytes} more would pass the {limit}-byte limit")
            self._bytes += nbytes
            self._by_caller[caller] = self._by_caller.get(caller, 0) + nbytes

    def _unreserve(self, nbytes: int, caller: str) -> None:
        with self._lock:
            self._forget(nbytes, caller)

    def _forget(self, nbytes: int, caller: str) -> None:
        """Takes a segment's bytes off the counts (lock held)."""
        self._bytes -= nbytes
        left = self._by_caller.get(caller, 0) - nbytes
        if left > 0:
            self._by_caller[caller] = left
        else:
            self._by_caller.pop(caller, None)
            self._pruned_at.pop(caller, None)

    def _pop(self, name: str) -> _Owned | None:
        """Stops owning name (lock held)."""
        rec = self._owned.pop(name, None)
        if rec is not None:
            self._forget(rec.nbytes, rec.caller)
        return rec

    def write(self, nbytes: int, fill: Callable[[ShmSegment], None], caller: str = "") -> str:
        """Writes a new segment with fill() and returns its name.

        Creates an unnamed segment, lets fill() write it, names it and unmaps it (on the background
        thread); on any failure the segment is gone before the exception propagates."""
        seg = self.create(nbytes, caller)
        try:
            fill(seg)
        except BaseException:
            self.abandon(seg, caller)
            raise
        name = self.publish(seg, caller)
        seg.close_later()
        return name

    def deliver(self, nbytes: int, fill: Callable[[Any], None],
                caller: str = "") -> tuple[str, int]:
        """Like ``write``, from a reused segment when this registry reuses them (else a new one).

        Returns (name, offset of the tensor in the file)."""
        if self.slabs is None:
            return self.write(nbytes, fill, caller), 0
        if self.closed:
            raise RuntimeError("shm registry is closed (shutting down)")
        cap = self.slabs.size_class(nbytes)
        self._reserve(cap, caller)  # the whole slab is tmpfs taken
        try:
            # at the open-slab cap, released slabs of any class can make room
            self._reclaim(None if self.slabs.full() else cap)
            slab = self.slabs.acquire(nbytes)
        except BaseException:
            self._unreserve(cap, caller)
            raise
        if slab is None:  # declined (descriptors): a new file, at offset 0
            self._unreserve(cap, caller)
            return self.write(nbytes, fill, caller), 0
        try:
            fill(slab)
        except BaseException:
            self._unreserve(cap, caller)
            self.slabs.abort(slab)
            raise
        try:
            name = self.slabs.publish(slab)
        except BaseException:
            self._unreserve(cap, caller)
            self.slabs.drop(slab)
            raise
        with self._lock:
            if not self.closed:
                self._owned[name] = _Owned(time.monotonic(), cap, caller, slab)
                self.created += 1
                return name, HEADER
            self._forget(cap, caller)
        _unlink_quiet(os.path.join(self.directory, name))
        self.slabs.drop(slab)
        raise RuntimeError("shm registry is closed (shutting down)")

    def _reclaim(self, cap: int | None, limit: int = 64) -> int:
        """Gives the slabs of class cap whose public name is gone back to the pool.

        cap None: any class. The oldest first, at most limit looked at: deliveries under load find
        them without waiting for a prune. Returns how many."""
        with self._lock:
            recs = [(n, r) for n, r in self._owned.items()
                    if r.slab is not None and cap in (None, r.slab.capacity)][:limit]
        got = 0
        for name, rec in recs:
            if rec.slab is not None and rec.slab.released():
                with self._lock:
                    mine = self._owned.get(name) is rec and self._pop(name) is not None
                if mine:
                    self._settle(rec)
                    got += 1
        return got

    def _settle(self, rec: _Owned) -> None:
        """A popped record's segment is no longer delivered: a slab goes back to the pool."""
        if rec.slab is not None and self.slabs is not None:
            self.slabs.give_back(rec.slab)

    def release(self, name: str) -> None:
        """Unlinks a segment this process still owns (failure paths)."""
        with self._lock:
            rec = self._pop(name)
        if rec is not None:
            self.released += 1
            _unlink_quiet(os.path.join(self.directory, name))
            self._settle(rec)

    def owned(self) -> list[str]:
        with self._lock:
            return list(self._owned)

    def prune(self) -> int:
        """Forgets segments their consumers unlinked.

        Unlinks expired ones. Returns how many are still outstanding."""
        return self._prune()

    def _prune(self, everyone: bool = True, caller: str = "") -> int:
        now = time.monotonic()
        with self._lock:
            items = [(n, r) for n, r in self._owned.items() if everyone or r.caller == caller]
        gone, expired = [], []
        for name, rec in items:
            if rec.slab is not None and rec.slab.released():
                gone.append(name)
            elif rec.slab is None and not os.path.lexists(os.path.join(self.directory, name)):
                gone.append(name)
            elif self.ttl_s > 0 and now - rec.born > self.ttl_s:
                expired.append(name)
        for name in expired:
            _unlink_quiet(os.path.join(self.directory, name))
        with self._lock:
            settle = [rec for rec in map(self._pop, gone + expired) if rec is not None]
            self.expired += len(expired)
            left = len(self._owned)
        for rec in settle:
            self._settle(rec)
        if self.slabs is not None and everyone:
            self.slabs.trim()
        return left

    def close(self) -> int:
        """Unlinks every owned segment and refuses new ones; returns how many were removed."""
        with self._lock:
            self.closed = True
        if self.pool is not None:
            self.pool.close()
        removed = self.unlink_all()
        if self.slabs is not None:
            self.slabs.close()
        return removed

    def unlink_all(self) -> int:
        """Unlinks every segment still owned; returns how many files were removed."""
        with self._lock:
            recs = {name: self._pop(name) for name in list(self._owned)}
        removed = sum(_unlink_quiet(os.path.join(self.directory, n)) for n in recs)
        for rec in recs.values():
            if rec is not None and rec.slab is not None and self.slabs is not None:
                self.slabs.drop(rec.slab)
        return removed

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"outstanding": len(self._owned), "outstanding_bytes": self._bytes,
                    "created": self.created, "expired": self.expired,
                    "released": self.released, "refused": self.refused,
                    "unmapped_inline": shm_segment.unmapped_inline}


__all__ = [
    "SHM_DIR",
    "SHM_PREFIX",
    "ShmNameError",
    "ShmQuotaError",
    "ShmRegistry",
    "ShmSegment",
    "check_shm_name",
    "create_segment",
    "default_outstanding_cap",
    "is_segment_name",
    "owner_id",
    "shm_namespace",
    "sweep_dead_segments",
    "tmpfs_bytes",
]
