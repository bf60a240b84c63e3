"""Who made a /dev/shm segment, and whether that producer is still alive.

Names: ``smg-fast-<pid>-<nonce>-<seq>``. The nonce is 8 hex digits naming the producer's pid
namespace and 8 random ones, drawn again after a fork; a producer is ``<pid>-<nonce>``.

Liveness: before its first segment in a directory, a producer creates
``smg-fast-<pid>-<nonce>.lock`` there, already holding an exclusive flock on it, and keeps it
until it exits. The kernel drops the lock when the process dies, however it dies, and a flock is
a property of the file, so it is seen alike from every pid namespace or container that shares
the tmpfs. :func:`sweep_dead_segments` tries each producer's lock: taken means the producer is
gone, and its segments (then its lock file) are removed. A forked child closes its inherited
copies of the lock descriptors, so it never keeps its parent's lock alive.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import threading
from collections import defaultdict
from collections.abc import Callable

from .errors import ShmNameError

log = logging.getLogger("smg_fast.shm")

SHM_DIR = "/dev/shm"
SHM_PREFIX = "smg-fast-"
_NAME_RE = re.compile(r"^smg-fast-(\d+)-([0-9a-f]{16})-(\d+)$")
_LOCK_RE = re.compile(r"^smg-fast-(\d+)-([0-9a-f]{16})\.lock$")
_DIR_RE = re.compile(r"^smg-fast-(\d+)-([0-9a-f]{16})-reuse\d+$")  # private names of reused ones
_MAX_NAME = 255


def check_shm_name(name: str) -> None:
    """A segment name must be a plain file name: no separators, no '..', no NUL."""
    if not isinstance(name, str) or not name:
        raise ShmNameError("shm handle has an empty name")
    if "/" in name or "\\" in name or "\0" in name or ".." in name or len(name) > _MAX_NAME:
        raise ShmNameError(f"invalid shm segment name {name!r}: must be a plain file name "
                          "(no path separators, no '..')")


def is_segment_name(name: str) -> bool:
    """Whether name has the shape of an smg-fast segment (``smg-fast-<pid>-<nonce>-<seq>``)."""
    return isinstance(name, str) and _NAME_RE.match(name) is not None


def shm_namespace(directory: str = SHM_DIR) -> str:
    """``"<boot_id>:<st_dev of /dev/shm>"``.

    Equal on both sides exactly when they see the same /dev/shm (same kernel boot, same tmpfs
    mount), which is when the shm transport works."""
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
    """8 hex digits naming this process's pid namespace.

    The pid fallback of the sweeper judges only pids of its own namespace."""
    try:
        return f"{os.stat('/proc/self/ns/pid').st_ino & 0xFFFFFFFF:08x}"
    except OSError:
        return "00000000"


def link_fd(fd: int, directory: str, name: str) -> None:
    """Gives the unnamed (O_TMPFILE) file open at fd the name directory/name.

    Linkat of /proc/self/fd/N with AT_SYMLINK_FOLLOW, which needs no CAP_DAC_READ_SEARCH (unlike
    AT_EMPTY_PATH). A destination directory descriptor is what makes CPython call linkat: with plain
    paths it calls link(), which links the /proc symlink itself (EXDEV)."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dfd, follow_symlinks=True)
    finally:
        os.close(dfd)


def _locked_file(directory: str, path: str) -> int:
    """A descriptor holding an exclusive flock on a new file at path.

    The file appears under its name already locked (O_TMPFILE + link, else a private name + rename),
    so no sweeper ever sees it unlocked while its producer lives."""
    flags = os.O_RDWR | os.O_CLOEXEC
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            fd = os.open(directory, flags | tmpfile, 0o600)
        except OSError:
            fd = -1  # a filesystem without O_TMPFILE
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                link_fd(fd, directory, os.path.basename(path))
                return fd
            except OSError:
                os.close(fd)
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, path)
    except BaseException:
        os.close(fd)
        _unlink_quiet(tmp)
        raise
    return fd


class _Names:
    """Segment names of this process, and the lock files that say it is alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._nonce = ""
        self._seq = 0
        self._held: dict[tuple[int, int], tuple[int, str]] = {}  # dir -> (lock fd, lock path)
        self._warned = False

    def producer(self) -> str:
        with self._lock:
            self._refresh()
            return f"{self._pid}-{self._nonce}"

    def owner_id(self) -> str:
        return f"smg-fast:{self.producer()}"

    def next(self, directory: str = SHM_DIR) -> str:
        """A new segment name; first makes sure this process holds its lock in directory."""
        with self._lock:
            self._refresh()
            self._hold(directory)
            self._seq += 1
            return f"{SHM_PREFIX}{self._pid}-{self._nonce}-{self._seq}"

    def reuse_dir(self, directory: str = SHM_DIR) -> str:
        """A new name for a private directory of reused segments in directory.

        Named ``smg-fast-<pid>-<nonce>-reuse<n>``; first makes sure this process holds its lock
        there, so that sweepers see it alive."""
        with self._lock:
            self._refresh()
            self._hold(directory)
            self._seq += 1
            return f"{SHM_PREFIX}{self._pid}-{self._nonce}-reuse{self._seq}"

    def _refresh(self) -> None:
        pid = os.getpid()
        if pid != self._pid:
            self._pid, self._nonce, self._seq = pid, _pidns_tag() + secrets.token_hex(4), 0
            self._held = {}

    def _hold(self, directory: str) -> None:
        try:
            st = os.stat(directory)
        except OSError:
            return  # creating the segment fails on its own
        key = (st.st_dev, st.st_ino)
        if key in self._held:
            return
        path = os.path.join(directory, f"{SHM_PREFIX}{self._pid}-{self._nonce}.lock")
        try:
            fd = _locked_file(directory, path)
        except OSError as exc:
            # Segments without a lock file are judged by pid, in this pid namespace only.
            if not self._warned:
                self._warned = True
                log.warning("shm: cannot create the liveness lock %s (%s): segments left by "
                            "this process after a crash are only swept from its own pid "
                            "namespace", path, exc)
            fd = -1
        self._held[key] = (fd, path)

    def after_fork_in_child(self) -> None:
        """Closes the child's copies of the lock descriptors.

        A flock lives as long as any descriptor of it: a child keeping them would keep its dead
        parent alive."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        for fd, _ in self._held.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._held = {}
        self._pid = -1

    def at_exit(self) -> None:
        """Removes this process's lock files, except where its segments remain.

        Those are kept so that the next sweeper, in any pid namespace, can still tell the segments
        are orphans."""
        if os.getpid() != self._pid:
            return
        prefix = f"{SHM_PREFIX}{self._pid}-{self._nonce}-"
        for fd, path in self._held.values():
            if fd < 0:
                continue
            try:
                left = any(e.name.startswith(prefix)
                           for e in os.scandir(os.path.dirname(path)))
            except OSError:
                left = True
            if not left:
                _unlink_quiet(path)
            os.close(fd)
        self._held = {}


_NAMES = _Names()
os.register_at_fork(after_in_child=_NAMES.after_fork_in_child)
atexit.register(_NAMES.at_exit)


def owner_id() -> str:
    return _NAMES.owner_id()


def _unlink_quiet(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether pid names a live process in our pid namespace (EPERM: alive, not ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead_producer_lock(path: str, euid: int) -> int | None:
    """A descriptor holding the lock at path when its producer is gone (the lock could be taken).

    None while the producer lives, or when the file is not a lock file of ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == euid:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            log.debug("shm sweep: cannot test %s: %s", path, exc)
    os.close(fd)
    return None


def _remove_owned(entries: list[os.DirEntry], euid: int,
                  is_kind: Callable[[int], bool]) -> list[str]:
    """Removes this user's entries of one kind; returns their names.

    stat.S_ISREG: segments, stat.S_ISDIR: private directories of reused segments. Never follows
    symlinks."""
    removed = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not (is_kind(st.st_mode) and st.st_uid == euid):
            continue
        if is_kind is stat.S_ISDIR:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
        elif _unlink_quiet(entry.path):
            removed.append(entry.name)
    return removed


def sweep_dead_segments(directory: str = SHM_DIR) -> list[str]:
    """Unlinks the segments of smg-fast producers that are gone; returns the names removed.

    Their lock files and private directories of reused segments go too. A producer is gone when its
    lock file is not locked, in whatever pid namespace it ran; a producer without a lock file is
    judged by its pid, and only when it ran in this pid namespace. Only this user's regular files
    (and directories) are touched; live producers' segments never are."""
    euid = os.geteuid()
    own = _NAMES.producer()
    tag = _pidns_tag()
    segments: dict[str, list[os.DirEntry]] = defaultdict(list)
    dirs: dict[str, list[os.DirEntry]] = defaultdict(list)
    locks: dict[str, str] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        m = _NAME_RE.match(entry.name)
        if m:
            segments[f"{m.group(1)}-{m.group(2)}"].append(entry)
            continue
        m = _DIR_RE.match(entry.name)
        if m:
            dirs[f"{m.group(1)}-{m.group(2)}"].append(entry)
            continue
        m = _LOCK_RE.match(entry.name)
        if m:
            locks[f"{m.group(1)}-{m.group(2)}"] = entry.path
    removed: list[str] = []
    for producer in sorted(set(segments) | set(dirs) | set(locks)):
        if producer == own:
            continue
        lock = locks.get(producer)
        if lock is not None:
            fd = _dead_producer_lock(lock, euid)
            if fd is None:
                continue
            try:  # the segments first: the lock file is what tells later sweepers to look
                removed += _remove_owned(segments.get(producer, []), euid, stat.S_ISREG)
                removed += _remove_owned(dirs.get(producer, []), euid, stat.S_ISDIR)
                _unlink_quiet(lock)
            finally:
                os.close(fd)
            continue
        pid_s, nonce = producer.split("-", 1)
        pid = int(pid_s)
        if nonce[:8] != tag or pid == os.getpid() or pid_alive(pid):
            continue
        removed += _remove_owned(segments.get(producer, []), euid, stat.S_ISREG)
        removed += _remove_owned(dirs.get(producer, []), euid, stat.S_ISDIR)
    return removed


__all__ = [
    "SHM_DIR",
    "SHM_PREFIX",
    "ShmNameError",
    "check_shm_name",
    "is_segment_name",
    "owner_id",
    "shm_namespace",
    "sweep_dead_segments",
]
