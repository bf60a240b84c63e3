"""Shared-memory segments in /dev/shm: naming, creation, ownership, and the dead-pid sweeper.

Segments are files directly under /dev/shm named ``smg-fast-<pid>-<nonce>-<seq>``, read-only
(mode 0400) from creation: the creator writes through the descriptor it opened, consumers can
only open them for reading (root excepted).
The nonce starts with 8 hex digits naming the creator's pid namespace, so the sweeper only ever
judges pids it can see. ``smg_fast.tensors`` builds TensorData on top of these.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._background import call_later

SHM_DIR = "/dev/shm"
SHM_PREFIX = "smg-fast-"
_NAME_RE = re.compile(r"^smg-fast-(\d+)-([0-9a-f]{16})-(\d+)$")
_MAX_NAME = 255


class ShmNameError(ValueError):
    """A segment name that is not a plain file name."""

# ------------------------------------------------------------------------------------------
# Namespace token and segment names
# ------------------------------------------------------------------------------------------


def shm_namespace(directory: str = SHM_DIR) -> str:
    """``"<boot_id>:<st_dev of /dev/shm>"``: equal on both sides exactly when they see the same
    /dev/shm (same kernel boot, same tmpfs mount), which is when the shm transport works."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = "unknown-boot"
    try:
        dev = os.stat(directory).st_dev
    except OSError:
        return f"{boot}:none"
    return f"{boot}:{dev}"


def _pidns_tag() -> str:
    """8 hex digits naming this process's pid namespace (so a sweeper never judges the pids of
    another namespace that shares /dev/shm)."""
    try:
        return f"{os.stat('/proc/self/ns/pid').st_ino & 0xFFFFFFFF:08x}"
    except OSError:
        return "00000000"


class _Names:
    """smg-fast-<pid>-<nonce>-<seq>; the nonce (pid-namespace tag + 32 random bits) is drawn
    again after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._nonce = ""
        self._seq = 0

    def owner_id(self) -> str:
        with self._lock:
            self._refresh()
            return f"smg-fast:{self._pid}-{self._nonce}"

    def next(self) -> str:
        with self._lock:
            self._refresh()
            self._seq += 1
            return f"{SHM_PREFIX}{self._pid}-{self._nonce}-{self._seq}"

    def _refresh(self) -> None:
        pid = os.getpid()
        if pid != self._pid:
            self._pid, self._nonce, self._seq = pid, _pidns_tag() + secrets.token_hex(4), 0


_NAMES = _Names()


def check_shm_name(name: str) -> None:
    """A segment name must be a plain file name: no separators, no '..', no NUL."""
    if not isinstance(name, str) or not name:
        raise ShmNameError("shm handle has an empty name")
    if "/" in name or "\\" in name or "\0" in name or ".." in name or len(name) > _MAX_NAME:
        raise ShmNameError(f"invalid shm segment name {name!r}: must be a plain file name "
                          "(no path separators, no '..')")


# ------------------------------------------------------------------------------------------
# Producer side
# ------------------------------------------------------------------------------------------


@dataclass
class ShmSegment:
    """A freshly created, still mapped segment; ``array(dtype)`` is the writable destination."""

    name: str
    path: str
    nbytes: int
    _mm: mmap.mmap | None
    _fd: int = -1  # kept open by pooled segments, to shrink them when taken

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
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Unmaps (the file stays). Every array() view must be gone first."""
        self._close_fd()
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def close_later(self) -> None:
        """Unmaps on the background thread (unmapping tens of MB costs milliseconds); a view
        still alive then keeps the mapping until it is dropped."""
        self._close_fd()
        if self._mm is not None:
            call_later(_close_mapping, self._mm)
            self._mm = None

    def detach(self) -> np.ndarray:
        """A read-only uint8 view of the whole segment that owns this process's mapping from
        now on: it stays valid, and keeps the pages alive, after the name is unlinked, until
        the view is dropped. The segment object itself is closed."""
        view = self.array(np.uint8)
        view.flags.writeable = False
        self._close_fd()
        self._mm = None
        return view


def _close_mapping(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:  # a view is still alive: it unmaps when it is dropped
        pass


def create_segment(nbytes: int, directory: str = SHM_DIR, *, populate: bool = False,
                   keep_fd: bool = False) -> ShmSegment:
    """A new read-only (0400) file of nbytes under directory, space reserved (so a full tmpfs
    fails here with ENOSPC instead of SIGBUS later) and mapped read-write through the descriptor
    opened at creation (``populate``: with its page table filled in advance; ``keep_fd``: the
    descriptor stays open for ``shrink``).

    Read-only because a consumer must never write into a segment: the server's pixel cache may
    keep serving the pages of a segment it delivered (see ``ShmRegistry.write_mapped``). A
    consumer running as root could still open it for writing; ``read_tensor`` maps it
    copy-on-write, so writes to its array never reach the file."""
    if nbytes < 1:
        raise ValueError(f"shm segment size must be positive, got {nbytes}")
    name = _NAMES.next()
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
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
        _unlink_quiet(path)
        raise
    if keep_fd:
        return ShmSegment(name, path, nbytes, mm, fd)
    os.close(fd)
    return ShmSegment(name, path, nbytes, mm)


def _unlink_quiet(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class ShmRegistry:
    """Creates segments and remembers the ones this process still owns.

    A segment is owned from creation until the consumer unlinks it (``prune`` notices) or the
    producer gives it up (``release``, on a failure path). ``close`` at shutdown removes
    whatever is left. ``ttl_s`` > 0: ``prune`` also unlinks segments nobody read in that time.
    ``pool_bytes`` > 0: segments come from a :class:`~smg_fast.shm_pool.SegmentPool` of
    pre-faulted ones when it has one of the right size.
    """

    def __init__(self, directory: str = SHM_DIR, ttl_s: float = 0.0,
                 pool_bytes: int = 0) -> None:
        self.directory = directory
        self.ttl_s = float(ttl_s)
        self.pool = None
        if pool_bytes > 0:
            from .shm_pool import SegmentPool

            self.pool = SegmentPool(pool_bytes, directory)
        self._owned: dict[str, float] = {}
        self._lock = threading.Lock()
        self.created = 0
        self.closed = False
        self.expired = 0
        self.released = 0

    def create(self, nbytes: int) -> ShmSegment:
        if self.closed:
            raise RuntimeError("shm registry is closed (shutting down)")
        seg = self.pool.take(nbytes) if self.pool is not None else None
        if seg is None:
            seg = create_segment(nbytes, self.directory)
        with self._lock:
            if not self.closed:
                self._owned[seg.name] = time.monotonic()
                self.created += 1
                return seg
        seg.close()
        _unlink_quiet(seg.path)
        raise RuntimeError("shm registry is closed (shutting down)")

    def write(self, nbytes: int, fill: Callable[[ShmSegment], None]) -> str:
        """Creates a segment, lets fill() write it, unmaps it (on the background thread) and
        returns its name; on any failure the segment is unlinked before the exception
        propagates."""
        seg = self._filled(nbytes, fill)
        seg.close_later()
        return seg.name

    def write_mapped(self, nbytes: int, fill: Callable[[ShmSegment], None]
                     ) -> tuple[str, np.ndarray]:
        """Like ``write``, but keeps this process's mapping: returns the name and a read-only
        uint8 view of the written bytes (``ShmSegment.detach``), valid after the consumer
        unlinks the name, for as long as the view lives."""
        seg = self._filled(nbytes, fill)
        return seg.name, seg.detach()

    def _filled(self, nbytes: int, fill: Callable[[ShmSegment], None]) -> ShmSegment:
        seg = self.create(nbytes)
        try:
            fill(seg)
        except BaseException:
            try:
                seg.close()
            except BufferError:  # a view is still alive in the traceback; GC unmaps it
                pass
            self.release(seg.name)
            raise
        return seg

    def release(self, name: str) -> None:
        """Unlinks a segment this process still owns (failure paths)."""
        with self._lock:
            owned = self._owned.pop(name, None) is not None
        if owned:
            self.released += 1
            _unlink_quiet(os.path.join(self.directory, name))

    def owned(self) -> list[str]:
        with self._lock:
            return list(self._owned)

    def prune(self) -> int:
        """Forgets segments their consumers unlinked; unlinks expired ones. Returns how many
        are still outstanding."""
        now = time.monotonic()
        with self._lock:
            items = list(self._owned.items())
        gone, expired = [], []
        for name, born in items:
            if not os.path.lexists(os.path.join(self.directory, name)):
                gone.append(name)
            elif self.ttl_s > 0 and now - born > self.ttl_s:
                expired.append(name)
        for name in expired:
            _unlink_quiet(os.path.join(self.directory, name))
        with self._lock:
            for name in gone + expired:
                self._owned.pop(name, None)
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
            self._owned.clear()
        return sum(_unlink_quiet(os.path.join(self.directory, n)) for n in names)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_dead_segments(directory: str = SHM_DIR) -> list[str]:
    """Unlinks smg-fast segments left by dead processes of this pid namespace (and this user);
    returns their names. Segments of live processes and of other namespaces are left alone."""
    tag = _pidns_tag()
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _NAME_RE.match(entry.name)
        if not m or m.group(2)[:8] != tag:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or _pid_alive(pid):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if _unlink_quiet(entry.path):
            removed.append(entry.name)
    return removed


def owner_id() -> str:
    return _NAMES.owner_id()


__all__ = [
    "SHM_DIR",
    "SHM_PREFIX",
    "ShmNameError",
    "ShmRegistry",
    "ShmSegment",
    "check_shm_name",
    "create_segment",
    "owner_id",
    "shm_namespace",
    "sweep_dead_segments",
]
