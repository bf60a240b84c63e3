"""Reused shm segments ("slabs").

Tmpfs files the producer keeps open and mapped and delivers again and again under fresh names, so a
shm response is written into memory that is already allocated and mapped, instead of a new file
whose pages the kernel must zero and fault in (~2 GB/s, more than computing a 1080p tensor).

Life of a slab:

- made: ``O_TMPFILE`` in the shm directory, 0400, space reserved, mapped read-write by the
  producer, and linked under a private name in ``smg-fast-<pid>-<nonce>-reuse<n>/`` (0700). That
  name keeps the file linkable once a consumer unlinks its public name (an unlinked file that
  once had a name can never be linked again).
- leased: before every write the producer takes a write lease (``F_SETLEASE F_WRLCK``). The
  kernel grants it only when no other open file description of the file exists, in any
  process: no descriptor and no mapping. While it is held, anyone else's ``open`` or
  ``truncate`` of the file waits until the producer lets go (or ``/proc/sys/fs/
  lease-break-time``, 45 s by default, passes). So nobody can truncate the file under the
  producer's stores (no SIGBUS), and nobody still holds the bytes it is about to overwrite (a
  result a consumer holds never changes).
- delivered: the lease is dropped and the file is linked under a fresh public name
  ``smg-fast-<pid>-<nonce>-<seq>``; the tensor starts at ``HEADER`` (the handle's offset),
  after a header page saying so. Bytes past the tensor are zeros: a reused slab's tail left by
  a larger earlier tensor is zeroed before the write (only that difference).
- released: the public name is gone (the consumer unlinked it, or the TTL did): the slab is
  idle, and the next delivery of its size class reuses it if the lease is granted then (a
  consumer that still maps it keeps it out until it lets go).
- dropped: over the idle budget, idle for ``IDLE_S``, found changed (size, mode, links),
  evicted to make room for another class under the open-slab cap, or at close: private name
  unlinked, mapping and descriptor closed.

Every live slab (idle or delivered) holds two descriptors (its own and the mapping's), so at
most ``max_open`` of them exist (an eighth of ``RLIMIT_NOFILE``: a quarter of the descriptors);
past that, and when making one fails for want of descriptors or memory, ``acquire`` declines
and the caller writes a fresh file instead. The slab itself, its size classes and that cap:
:mod:`smg_fast.transport.shm_slab`.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import logging
import mmap
import os
import shutil
import signal
import stat
import threading
import time
import weakref
from collections import deque

import numpy as np

from .shm_owner import _NAMES, SHM_DIR, link_fd
from .shm_segment import unmap_later
from .shm_slab import (  # noqa: F401  (re-exported)
    GRANULE,
    HEADER,
    PAGE,
    Slab,
    default_max_open,
    size_class,
)

log = logging.getLogger("smg_fast.shm")

# making a slab failed for want of descriptors or memory, or someone opened it meanwhile: no
# reuse for this delivery (a fresh file, or inline), not a failed request
_DECLINE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EBUSY)
IDLE_S = 60.0  # idle slabs unused this long are dropped
_HEADER_TEXT = (b"smg-fast reused shm segment v1: the tensor starts at the handle's offset. "
                b"Unlink this name (and close or unmap the file) to release it.\n")
# Sent on a lease break (someone opening the file while the producer writes). SIGIO, the
# default, would kill the process; SIGURG is ignored unless a handler is installed.
_LEASE_SIGNAL = int(signal.SIGURG)
_POOLS: weakref.WeakSet[SlabPool] = weakref.WeakSet()


def live_reuse_dirs() -> set[str]:
    """Names of the private directories of this process's live slab pools (not leaks)."""
    return {p.dir_name for p in list(_POOLS) if p.dir_name}


class LeaseUnavailable(OSError):
    """The filesystem or kernel grants no file leases: reuse cannot be made safe there."""


def _take_lease(fd: int) -> bool:
    """A write lease on fd.

    True when granted, False while another open file description of the file exists (a consumer
    still has it open or mapped)."""
    fcntl.fcntl(fd, fcntl.F_SETSIG, _LEASE_SIGNAL)  # dropping a lease resets it: every time
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EBUSY):
            return False
        raise LeaseUnavailable(exc.errno, f"no file lease: {exc.strerror}") from None
    if fcntl.fcntl(fd, fcntl.F_GETSIG) != _LEASE_SIGNAL:  # a break would send SIGIO
        _drop_lease(fd)
        raise LeaseUnavailable(errno.ENOTSUP, "the kernel reset the lease signal")
    return True


def _drop_lease(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)


class SlabPool:
    """Idle slabs by size class (``size_class``), at most ``budget_bytes`` of them.

    Delivered ones belong to the caller (the registry) until it gives them back. At most
    ``max_open`` slabs live at once (default: ``default_max_open()``). Raises
    :class:`LeaseUnavailable` at creation where leases do not work."""

    def __init__(self, budget_bytes: int, directory: str = SHM_DIR, *,
                 granule: int = GRANULE, max_open: int = 0) -> None:
        self.budget_bytes = int(budget_bytes)
        self.max_open = int(max_open) or default_max_open()
        self._open = 0  # live slabs: made (or being made) and not dropped
        self.directory = directory
        self.granule = granule
        self.dir_name = ""
        self._dir_fd = -1
        self.pid = os.getpid()
        self._idle: dict[int, deque[Slab]] = {}
        self._idle_bytes = 0
        self._lock = threading.Lock()
        self._seq = 0
        self._closed = False
        self.reused = self.made = self.busy = self.dropped = self.declined = 0
        _probe(directory)
        _POOLS.add(self)

    def size_class(self, nbytes: int) -> int:
        return size_class(nbytes, self.granule)

    def full(self) -> bool:
        """Whether max_open slabs live and none is idle (a new one would be declined)."""
        with self._lock:
            return self._open >= self.max_open and not self._idle_bytes

    # ---- taking a slab to write ----

    def acquire(self, nbytes: int) -> Slab | None:
        """A leased slab with room for nbytes, or None for no reuse.

        Leased: nobody else has it open, write freely. Reused when an idle one of its class is free,
        else made; its bytes past the tensor are zeros. None (counted ``declined``): no reuse for
        this one, write a fresh file (``max_open`` slabs live and none idle to evict, or making one
        failed with EMFILE, ENFILE, ENOMEM or EBUSY). Raises OSError (ENOSPC...) when none can be
        made otherwise."""
        cap = self.size_class(nbytes)
        with self._lock:
            if self._closed:
                raise RuntimeError("shm slab pool is closed")
            candidates = list(self._idle.get(cap, ()))
        slab = self._first_free(cap, candidates) if candidates else None
        if slab is None:  # none idle, or all still open somewhere: a new one
            slab = self._make_within_cap(cap)
            if slab is None:
                return None
        end = HEADER + nbytes
        if slab.dirty > end:  # a larger tensor was here: nobody reads its tail
            np.frombuffer(slab.mm, np.uint8, slab.dirty - end, end).fill(0)
        slab.dirty = end
        slab.nbytes = nbytes
        return slab

    def _make_within_cap(self, cap: int) -> Slab | None:
        """A new slab when one more fits under max_open, else None.

        The oldest idle slab of any class is evicted to make room."""
        evict = None
        with self._lock:
            if self._open >= self.max_open and self._idle_bytes > 0:
                evict = self._pop_oldest()
            elif self._open >= self.max_open:
                self.declined += 1
                return None
            self._open += 1  # this one's place, held while it is made
        if evict is not None:
            self._drop(evict)
        try:
            return self._make(cap)
        except OSError as exc:
            with self._lock:
                self._open -= 1
                declined = exc.errno in _DECLINE_ERRNOS
                self.declined += declined
            if declined:
                log.debug("shm: no new reused segment (%s): a fresh file instead", exc)
                return None
            raise
        except BaseException:
            with self._lock:
                self._open -= 1
            raise

    def _first_free(self, cap: int, candidates: list[Slab]) -> Slab | None:
        """The oldest usable idle slab, taken out of the idle list.

        Usable: its lease is granted and it is unchanged. Changed ones are dropped, busy ones
        stay."""
        for slab in candidates:
            with self._lock:
                idle = self._idle.get(cap)
                if not idle or slab not in idle:
                    continue  # another thread took it
                idle.remove(slab)
                self._idle_bytes -= cap
            if not _take_lease(slab.fd):
                self.busy += 1
                with self._lock:  # someone still has it open or mapped: keep it for later
                    keep = not self._closed
                    if keep:
                        # at the back: the next acquire tries the free ones first
                        self._idle.setdefault(cap, deque()).append(slab)
                        self._idle_bytes += cap
                if not keep:
                    self._drop(slab)
                continue
            if not self._intact(slab):
                _drop_lease(slab.fd)
                self._drop(slab)
                continue
            self.reused += 1
            slab.uses += 1
            return slab
        return None

    def _intact(self, slab: Slab) -> bool:
        """Under the lease: only the private name left, still this file, same size, 0400."""
        try:
            st = os.fstat(slab.fd)
            priv = os.lstat(slab.key, dir_fd=self._dir_fd)
        except OSError:
            return False
        return (st.st_nlink == 1 and priv.st_ino == slab.ino and st.st_size == slab.capacity
                and stat.S_IMODE(st.st_mode) == 0o400 and st.st_uid == os.geteuid())

    def _make(self, cap: int) -> Slab:
        self._ensure_dir()
        fd = os.open(self.directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o400)
        mm = None
        try:
            try:
                os.posix_fallocate(fd, 0, cap)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(fd, cap)
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mm = mmap.mmap(fd, cap, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            if not _take_lease(fd):  # someone opened /proc/<pid>/fd/<n> already: give up
                raise OSError(errno.EBUSY, "a new shm segment is open elsewhere")
            try:
                mm[:len(_HEADER_TEXT)] = _HEADER_TEXT
                with self._lock:
                    self._seq += 1
                    key = str(self._seq)
                os.link(f"/proc/self/fd/{fd}", key, dst_dir_fd=self._dir_fd,
                        follow_symlinks=True)
            except BaseException:
                _drop_lease(fd)
                raise
        except BaseException:
            if mm is not None:
                mm.close()
            os.close(fd)
            raise
        self.made += 1
        return Slab(fd, mm, cap, os.fstat(fd).st_ino, key)

    def _ensure_dir(self) -> None:
        with self._lock:
            if self._dir_fd >= 0:
                return
            for _ in range(16):  # (a same-user process may take a predictable name first)
                name = _NAMES.reuse_dir(self.directory)
                path = os.path.join(self.directory, name)
                try:
                    os.mkdir(path, 0o700)
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError(errno.EEXIST, f"no free directory name in "
                                      f"{self.directory}")
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            self.dir_name, self._dir_fd = name, fd

    # ---- delivering and getting it back ----

    def publish(self, slab: Slab) -> str:
        """Ends the write (drops the lease) and links the slab under a fresh public name."""
        _drop_lease(slab.fd)
        for _ in range(16):
            name = _NAMES.next(self.directory)
            try:
                link_fd(slab.fd, self.directory, name)
            except FileExistsError:
                continue
            slab.name = name
            return name
        raise FileExistsError(errno.EEXIST, f"no free segment name in {self.directory}")

    def abort(self, slab: Slab) -> None:
        """A slab acquired but not published (its write failed): idle again."""
        _drop_lease(slab.fd)
        self.give_back(slab)

    def give_back(self, slab: Slab) -> None:
        """A delivered slab whose public name is gone (or one never delivered).

        Idle, within the budget (the oldest idle ones are dropped first)."""
        slab.name = ""
        slab.idle_since = time.monotonic()
        drop = []
        with self._lock:
            if self._closed or slab.capacity > self.budget_bytes:
                drop.append(slab)
            else:
                self._idle.setdefault(slab.capacity, deque()).append(slab)
                self._idle_bytes += slab.capacity
                while self._idle_bytes > self.budget_bytes:
                    drop.append(self._pop_oldest())
        for s in drop:
            self._drop(s)

    def _pop_oldest(self) -> Slab:
        cap = min((q for q in self._idle.values() if q), key=lambda q: q[0].idle_since)[0].capacity
        slab = self._idle[cap].popleft()
        self._idle_bytes -= cap
        return slab

    def trim(self, idle_s: float = IDLE_S) -> int:
        """Drops idle slabs unused for idle_s; returns how many."""
        now = time.monotonic()
        old = []
        with self._lock:
            for cap, q in self._idle.items():
                while q and now - q[0].idle_since > idle_s:
                    old.append(q.popleft())
                    self._idle_bytes -= cap
        for slab in old:
            self._drop(slab)
        return len(old)

    def drop(self, slab: Slab) -> None:
        """Forgets a slab for good (its public name, if any, is the caller's business)."""
        self._drop(slab)

    def _drop(self, slab: Slab) -> None:
        with self._lock:
            self.dropped += 1
            self._open -= 1
        if self._dir_fd >= 0:
            try:
                if os.lstat(slab.key, dir_fd=self._dir_fd).st_ino == slab.ino:
                    os.unlink(slab.key, dir_fd=self._dir_fd)
            except OSError:
                pass
        try:
            os.close(slab.fd)
        except OSError:
            pass
        unmap_later(slab.mm)  # unmapping 50 MB takes milliseconds

    def close(self) -> int:
        """Drops every idle slab and removes the private directory.

        Delivered slabs must have been dropped by their holder first. Returns how many idle ones
        there were."""
        with self._lock:
            self._closed = True
            idle = [s for q in self._idle.values() for s in q]
            self._idle.clear()
            self._idle_bytes = 0
        for slab in idle:
            self._drop(slab)
        if self._dir_fd >= 0:
            path = os.path.join(self.directory, self.dir_name)
            os.close(self._dir_fd)
            self._dir_fd = -1
            shutil.rmtree(path, ignore_errors=True)
            self.dir_name = ""
        return len(idle)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"reused": self.reused, "made": self.made, "busy": self.busy,
                    "dropped": self.dropped, "declined": self.declined,
                    "idle": sum(len(q) for q in self._idle.values()),
                    "idle_bytes": self._idle_bytes, "budget_bytes": self.budget_bytes,
                    "open": self._open, "max_open": self.max_open}


def _remove_dirs_at_exit() -> None:
    """Removes the private directories of pools still open at exit.

    Their files vanish with the exiting process's descriptors; delivered segments stay for their
    consumers."""
    for pool in list(_POOLS):
        if pool.dir_name and pool.pid == os.getpid():
            shutil.rmtree(os.path.join(pool.directory, pool.dir_name), ignore_errors=True)


atexit.register(_remove_dirs_at_exit)


def _probe(directory: str) -> None:
    """Raises LeaseUnavailable (or OSError) unless an unnamed file in directory can be leased.

    Reuse is only safe with leases."""
    if not getattr(os, "O_TMPFILE", 0) or not hasattr(fcntl, "F_SETLEASE"):
        raise LeaseUnavailable(errno.ENOTSUP, "no O_TMPFILE or file leases on this platform")
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o400)
    except OSError as exc:
        raise LeaseUnavailable(exc.errno, f"no O_TMPFILE in {directory}") from None
    try:
        if not _take_lease(fd):
            raise LeaseUnavailable(errno.EBUSY, "a lease on a new file was refused")
        _drop_lease(fd)
    finally:
        os.close(fd)


__all__ = ["HEADER", "LeaseUnavailable", "Slab", "SlabPool", "default_max_open",
           "live_reuse_dirs", "size_class"]
