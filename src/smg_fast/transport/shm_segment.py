"""Shared-memory segments in /dev/shm: creation, publication, and the tmpfs-size helpers.

A segment is born unnamed (``O_TMPFILE`` on the tmpfs, mode 0400), filled through the
producer's own mapping, and only then given its name ``smg-fast-<pid>-<nonce>-<seq>`` by
``publish`` (a link of ``/proc/self/fd/N``) when it is delivered (names, producer liveness and
the sweeper of dead producers' segments: :mod:`smg_fast.transport.shm_owner`). So no other
process can reach a segment while the producer writes into it: a consumer running as the
producer's user could otherwise chmod and truncate a visible segment (the pool's ready ones, or
a fresh one being filled), and the producer's next store into its MAP_SHARED mapping would raise
SIGBUS and kill it. After ``publish`` the producer never touches the pages again (it never reads
a segment back nor serves one twice), so nothing a consumer does to a delivered segment reaches
it. A filesystem without O_TMPFILE gets today's named files (created 0400 under their final
name), with that SIGBUS window open to same-user consumers. The registry of owned segments is
:mod:`smg_fast.transport.shm`; ``smg_fast.transport.tensors`` builds TensorData on top of both."""

from __future__ import annotations

import errno
import mmap
import os
import resource
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .background import call_later
from .shm_owner import _NAMES, SHM_DIR, _unlink_quiet, link_fd

# ------------------------------------------------------------------------------------------
# Producer side
# ------------------------------------------------------------------------------------------


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
    """Half of the smaller of the tmpfs holding directory and physical memory.

    tmpfs pages are memory, and /dev/shm is often sized above it. Room is left for the segment pool
    and for other users of the tmpfs."""
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
        """Gives the segment its name in its directory and returns it.

        The name is the first free one of this process's sequence: a same-user process may have
        taken a predictable name first. The producer must not write into the segment after this."""
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
        """Unmaps (a published file stays; an unpublished one is gone once unmapped).

        Every array() view must be gone first."""
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
        """Unmaps on the background thread (unmapping tens of MB costs milliseconds).

        A view still alive then keeps the mapping until it is dropped."""
        self._close_fd()
        if self._mm is not None:
            unmap_later(self._mm)
            self._mm = None


# The coarsest size-class step of ready and reused segments (large tensors).
GRANULE = 2 * 1024 * 1024
_PUBLISH_TRIES = 16
# errno of open(O_TMPFILE) where the filesystem or kernel lacks it: make named files instead
_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)


def close_mapping(mm: mmap.mmap) -> None:
    """Unmaps mm now, or when its last exported view is dropped."""
    try:
        mm.close()
    except BufferError:  # a view is still alive: it unmaps when it is dropped
        pass


def soft_nofile() -> int:
    """The process's soft RLIMIT_NOFILE (1 << 20 when unlimited, 1024 when unknown)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return 1024
    return 1 << 20 if soft == resource.RLIM_INFINITY or soft < 0 else soft


# Python's mmap keeps a duplicate of the file's descriptor until it is closed, so every mapping
# waiting for the background thread holds one: a burst of deliveries faster than the thread
# drains them (a loaded host) would otherwise run the process out of descriptors.
_waiting = 0
_waiting_lock = threading.Lock()
# This process's mappings unmapped on the caller's thread: too many were waiting, or the
# background thread could not be started (every registry's stats() reports it).
unmapped_inline = 0


def _reset_after_fork() -> None:
    global _waiting, _waiting_lock, unmapped_inline
    _waiting = unmapped_inline = 0  # the parent's queued unmaps never run in a child
    _waiting_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def unmap_later(mm: mmap.mmap) -> None:
    """Unmaps mm on the background thread, or now when too many already wait there.

    At most a sixteenth of the soft ``RLIMIT_NOFILE`` (4 to 256) mappings wait at a time."""
    global _waiting, unmapped_inline
    cap = min(256, max(4, soft_nofile() // 16))
    with _waiting_lock:
        defer = _waiting < cap
        if defer:
            _waiting += 1
        else:
            unmapped_inline += 1
    if defer:
        try:
            call_later(_unmap_waiting, mm)
            return
        except RuntimeError:  # no release thread (threads or memory exhausted): unmap here
            _done_waiting()
            with _waiting_lock:
                unmapped_inline += 1
    close_mapping(mm)


def _unmap_waiting(mm: mmap.mmap) -> None:
    try:
        close_mapping(mm)
    finally:
        _done_waiting()


def _done_waiting() -> None:
    global _waiting
    with _waiting_lock:
        _waiting -= 1


def create_segment(nbytes: int, directory: str = SHM_DIR, *, populate: bool = False,
                   keep_fd: bool = False) -> ShmSegment:
    """A new read-only (0400) file of nbytes on the filesystem of directory, mapped read-write.

    Its space is reserved (so a full tmpfs fails here with ENOSPC instead of SIGBUS later) and it is
    mapped through the descriptor opened at creation (``populate``: with its page table filled in
    advance).

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


__all__ = ["ShmSegment", "create_segment", "default_outstanding_cap", "tmpfs_bytes"]
