"""Shared-memory segments in /dev/shm: creation, ownership and the cap on unread bytes.

A segment is born unnamed (``O_TMPFILE`` on the tmpfs, mode 0400), filled through the
producer's own mapping, and only then given its name ``smg-fast-<pid>-<nonce>-<seq>`` by
``publish`` (a link of ``/proc/self/fd/N``) when it is delivered (names, producer liveness and
the sweeper of dead producers' segments: :mod:`smg_fast.shm_owner`). So no other process can
reach a segment while the producer writes into it: a consumer running as the producer's user
could otherwise chmod and truncate a visible segment (the pool's ready ones, or a fresh one
being filled), and the producer's next store into its MAP_SHARED mapping would raise SIGBUS
and kill it. After ``publish`` the producer never touches the pages again (it never reads a
segment back nor serves one twice), so nothing a consumer does to a delivered segment reaches
it. A filesystem without O_TMPFILE gets today's named files (created 0400 under their final
name), with that SIGBUS window open to same-user consumers. ``smg_fast.tensors`` builds
TensorData on top of these.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._background import call_later
from .shm_owner import (  # noqa: F401  (_NAME_RE, _pidns_tag: used by tests and the pool)
    _NAME_RE,
    _NAMES,
    SHM_DIR,
    SHM_PREFIX,
    ShmNameError,
    _pidns_tag,
    _unlink_quiet,
    check_shm_name,
    is_segment_name,
    link_fd,
    owner_id,
    shm_namespace,
    sweep_dead_segments,
)

# ------------------------------------------------------------------------------------------
# Producer side
# ------------------------------------------------------------------------------------------


class ShmQuotaError(Exception):
    """A new segment would exceed the registry's cap on unread bytes (``reason`` "cap") or
    the caller's share of it ("share"). Nothing was created."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def tmpfs_bytes(directory: str = SHM_DIR) -> int:
    """Size of the filesystem holding directory (0 if unknown)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


def default_outstanding_cap(directory: str = SHM_DIR) -> int:
    """Half of the smaller of the tmpfs holding directory and physical memory (tmpfs pages are
    memory; /dev/shm is often sized above it): room is left for the segment pool and for other
    users of the tmpfs."""
    sizes = [b for b in (tmpfs_bytes(directory), _ram_bytes()) if b > 0]
    return min(sizes) // 2 if sizes else 1 << 30


@dataclass
class ShmSegment:
    """A freshly created, still mapped segment; ``array(dtype)`` is the writable destination.

    ``name`` and ``path`` are "" until ``publish`` links it into its directory (a segment
    made on a filesystem without O_TMPFILE is named from creation)."""

    name: str
    path: str
    nbytes: int
    _mm: mmap.mmap | None
    _fd: int = -1  # open until published (unnamed ones) or while a pool may shrink it
    directory: str = SHM_DIR

    @property
    def published(self) -> bool:
        return bool(self.name)

    def array(self, dtype: Any = np.uint8) -> np.ndarray:
        """The first nbytes of the mapping as a writable array of dtype."""
        if self._mm is None:
            raise ValueError("segment is closed")
        dt = np.dtype(dtype)
        return np.frombuffer(self._mm, dtype=dt, count=self.nbytes // dt.itemsize)

    def shrink(self, nbytes: int) -> None:
        """Truncates the file to nbytes (a pooled segment handed out for a smaller tensor)."""
        if nbytes != self.nbytes:
            if self._fd < 0:
                raise ValueError("segment has no open descriptor to shrink it")
            os.ftruncate(self._fd, nbytes)
            self.nbytes = nbytes
        if self.published:
            self._close_fd()

    def publish(self) -> str:
        """Gives the segment its name in its directory (the first free one of this process's
        sequence: a same-user process may have taken a predictable name first) and returns it.
        The producer must not write into the segment after this."""
        if self.published:
            return self.name
        if self._fd < 0:
            raise ValueError("segment is closed")
        for _ in range(_PUBLISH_TRIES):
            name = _NAMES.next(self.directory)
            path = os.path.join(self.directory, name)
            try:
                link_fd(self._fd, self.directory, name)
            except FileExistsError:
                continue
            self.name, self.path = name, path
            self._close_fd()
            return name
        raise FileExistsError(errno.EEXIST, f"no free segment name in {self.directory} after "
                              f"{_PUBLISH_TRIES} tries (another process takes them)")

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Unmaps (a published file stays; an unpublished one is gone once unmapped). Every
        array() view must be gone first."""
        self._close_fd()
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def discard(self) -> None:
        """Unmaps (or leaves it to the last view) and removes the file, named or not."""
        try:
            self.close()
        except BufferError:  # a view is still alive (e.g. in a traceback); GC unmaps it
            self._mm = None
        if self.path:
            _unlink_quiet(self.path)

    def close_later(self) -> None:
        """Unmaps on the background thread (unmapping tens of MB costs milliseconds); a view
        still alive then keeps the mapping until it is dropped."""
        self._close_fd()
        if self._mm is not None:
            call_later(_close_mapping, self._mm)
            self._mm = None


_PUBLISH_TRIES = 16
# errno of open(O_TMPFILE) where the filesystem or kernel lacks it: make named files instead
_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)


def _close_mapping(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:  # a view is still alive: it unmaps when it is dropped
        pass


def create_segment(nbytes: int, directory: str = SHM_DIR, *, populate: bool = False,
                   keep_fd: bool = False) -> ShmSegment:
    """A new read-only (0400) file of nbytes on the filesystem of directory, space reserved (so
    a full tmpfs fails here with ENOSPC instead of SIGBUS later) and mapped read-write through
    the descriptor opened at creation (``populate``: with its page table filled in advance).

    The file is unnamed (O_TMPFILE) until ``publish``, which needs the descriptor: it stays
    open until then. Where O_TMPFILE is missing, the file is created under its final name and
    the descriptor is kept only with ``keep_fd`` (for ``shrink``).

    Read-only so that a consumer running as another user cannot write into it. Its owner (the
    producer's user) can still chmod it and write or truncate it once it is named: producers
    must treat a segment as gone once published (``read_tensor`` maps it copy-on-write, so a
    consumer's writes to its array never reach the file)."""
    if nbytes < 1:
        raise ValueError(f"shm segment size must be positive, got {nbytes}")
    name = path = ""
    fd = -1
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            fd = os.open(directory, tmpfile | os.O_RDWR | os.O_CLOEXEC, 0o400)
        except OSError as exc:
            if exc.errno not in _NO_TMPFILE:
                raise
    if fd < 0:
        name = _NAMES.next(directory)
        path = os.path.join(directory, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
    try:
        if name:
            os.fchmod(fd, 0o400)  # (not 0o600 & ~umask): nobody opens it for writing again
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(fd, nbytes)  # a filesystem without fallocate
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        mm = mmap.mmap(fd, nbytes, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        if path:
            _unlink_quiet(path)
        raise
    if keep_fd or not name:
        return ShmSegment(name, path, nbytes, mm, fd, directory)
    os.close(fd)
    return ShmSegment(name, path, nbytes, mm, -1, directory)


@dataclass
class _Owned:
    born: float
    nbytes: int
    caller: str


class ShmRegistry:
    """Creates segments and remembers the ones this process still owns.

    A segment is owned from ``publish`` (its bytes are counted from ``create``) until the
    consumer unlinks it (``prune`` notices) or the producer gives it up (``release``, on a
    failure path); an unpublished one has no name, and vanishes with its descriptor. ``close``
    at shutdown removes whatever is left. ``ttl_s`` > 0: ``prune`` also unlinks segments
    nobody read in that time.
    ``pool_bytes`` > 0: segments come from a :class:`~smg_fast.shm_pool.SegmentPool` of
    pre-faulted ones when it has one of the right size (its budget at most a quarter of the
    tmpfs).

    ``max_outstanding_bytes`` > 0 caps the bytes of owned (unread) segments, and
    ``share_bytes`` > 0 the part of them one caller (``create``'s ``caller``) may hold:
    a creation over either raises :class:`ShmQuotaError` (after a prune, to count the reads
    consumers made since the last one: of every segment over the cap, of the caller's over its
    share, each at most once per ``PRESSURE_PRUNE_S``, so that a caller holding many segments
    costs a bounded number of lstat calls).
    """

    PRESSURE_PRUNE_S = 0.01

    def __init__(self, directory: str = SHM_DIR, ttl_s: float = 0.0,
                 pool_bytes: int = 0, *, max_outstanding_bytes: int = 0,
                 share_bytes: int = 0) -> None:
        self.directory = directory
        self.ttl_s = float(ttl_s)
        self.max_outstanding_bytes = int(max_outstanding_bytes)
        self.share_bytes = int(share_bytes)
        self.pool = None
        size = tmpfs_bytes(directory)
        if size > 0:  # ready segments take tmpfs room from delivered ones: at most a quarter
            pool_bytes = min(pool_bytes, size // 4)
        if pool_bytes > 0:
            from .shm_pool import SegmentPool

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

    @property
    def outstanding_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def create(self, nbytes: int, caller: str = "") -> ShmSegment:
        """An unpublished segment of nbytes, its bytes reserved against the caller's limits
        (:class:`ShmQuotaError` otherwise). Hand it to ``publish`` once written, or to
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
        """Names a written segment from ``create`` and owns it from then on (until its
        consumer unlinks it, ``release``, the TTL or ``close``); returns its name."""
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
        """Like ``_over``; over a limit, first counts the reads consumers made since the last
        pressure prune of that scope (at most one per PRESSURE_PRUNE_S)."""
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
        """"" when a segment of nbytes for caller would pass neither limit now, else the one it
        would pass ("cap" or "share"). Advisory (lets a server refuse work before doing it):
        ``create`` decides."""
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
        """Creates an unnamed segment, lets fill() write it, names it, unmaps it (on the
        background thread) and returns its name; on any failure the segment is gone before the
        exception propagates."""
        seg = self.create(nbytes, caller)
        try:
            fill(seg)
        except BaseException:
            self.abandon(seg, caller)
            raise
        name = self.publish(seg, caller)
        seg.close_later()
        return name

    def release(self, name: str) -> None:
        """Unlinks a segment this process still owns (failure paths)."""
        with self._lock:
            owned = self._pop(name) is not None
        if owned:
            self.released += 1
            _unlink_quiet(os.path.join(self.directory, name))

    def owned(self) -> list[str]:
        with self._lock:
            return list(self._owned)

    def prune(self) -> int:
        """Forgets segments their consumers unlinked; unlinks expired ones. Returns how many
        are still outstanding."""
        return self._prune()

    def _prune(self, everyone: bool = True, caller: str = "") -> int:
        now = time.monotonic()
        with self._lock:
            items = [(n, r) for n, r in self._owned.items() if everyone or r.caller == caller]
        gone, expired = [], []
        for name, rec in items:
            if not os.path.lexists(os.path.join(self.directory, name)):
                gone.append(name)
            elif self.ttl_s > 0 and now - rec.born > self.ttl_s:
                expired.append(name)
        for name in expired:
            _unlink_quiet(os.path.join(self.directory, name))
        with self._lock:
            for name in gone + expired:
                self._pop(name)
            self.expired += len(expired)
            return len(self._owned)

    def close(self) -> int:
        """Unlinks every owned segment and refuses new ones; returns how many were removed."""
        with self._lock:
            self.closed = True
        if self.pool is not None:
            self.pool.close()
        return self.unlink_all()

    def unlink_all(self) -> int:
        """Unlinks every segment still owned; returns how many files were removed."""
        with self._lock:
            names = list(self._owned)
            for name in names:
                self._pop(name)
        return sum(_unlink_quiet(os.path.join(self.directory, n)) for n in names)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"outstanding": len(self._owned), "outstanding_bytes": self._bytes,
                    "created": self.created, "expired": self.expired,
                    "released": self.released, "refused": self.refused}


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
