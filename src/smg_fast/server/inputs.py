"""MediaItem -> encoded image bytes.

Inline data, data: URLs, and files under the allowed directories (resolved below the directory's fd
with no symlink followed anywhere on the path, regular files only, size-capped)."""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

import grpc

from ..imaging.data_urls import data_url_bytes
from .request_error import RequestError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _bad(index: int, problem: str) -> RequestError:
    return RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"item {index}: {problem}")


def resolve_item(index: int, item: Any, allowed_dirs: Sequence[str], max_bytes: int) -> bytes:
    """The encoded bytes of one MediaItem; RequestError (INVALID_ARGUMENT) naming the index."""
    kind = item.WhichOneof("source")
    if kind == "data":
        if not item.data:
            raise _bad(index, "empty data")
        return item.data
    if kind == "url":
        return resolve_url(index, item.url, allowed_dirs, max_bytes)
    raise _bad(index, "MediaItem has neither data nor url")


def resolve_url(index: int, url: str, allowed_dirs: Sequence[str], max_bytes: int) -> bytes:
    if not url:
        raise _bad(index, "empty url")
    if url[:5].lower() == "data:":
        return _data_url(index, url)
    if url[:7].lower() == "file://":
        parsed = urllib.parse.urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise _bad(index, f"file URL with a remote host: {url!r}")
        path = urllib.parse.unquote(parsed.path)
    elif _SCHEME.match(url):
        scheme = _SCHEME.match(url).group(1)
        raise _bad(index, f"unsupported URL scheme {scheme!r}: send the bytes, a data: URL or "
                          "a file path under an allowed directory")
    else:
        path = url
    return _read_allowed_file(index, path, allowed_dirs, max_bytes)


def _data_url(index: int, url: str) -> bytes:
    try:
        data = data_url_bytes(url)
    except ValueError as exc:
        raise _bad(index, str(exc)) from None
    if not data:
        raise _bad(index, "data: URL with no data")
    return data


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


# openat2(2) (Linux >= 5.6): the kernel resolves the whole path below a directory fd, refusing
# "..", absolute symlinks and any symlink at all, so a directory swapped for a symlink between
# a check and the open cannot lead outside. Older kernels (ENOSYS) or seccomp filters (EPERM)
# fall back to a walk that opens one component at a time with O_NOFOLLOW.
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (asm-generic)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


class _Escape(Exception):
    """The path would leave the allowed directory (a symlink or '..' on the way)."""


_openat2_state: dict[str, Any] = {}


def _libc_syscall() -> Any:
    fn = _openat2_state.get("syscall")
    if fn is None and "syscall" not in _openat2_state:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.syscall
            fn.restype = ctypes.c_long
        except (OSError, AttributeError):
            fn = None
        _openat2_state["syscall"] = fn
    return fn


def _openat2(dir_fd: int, rel: str) -> int | None:
    """fd of rel below dir_fd, or None when openat2 is not available here."""
    syscall = _libc_syscall()
    if syscall is None or _openat2_state.get("missing") or sys.platform != "linux":
        return None
    how = _OpenHow(_OPEN_FLAGS, 0,
                   _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    path = os.fsencode(rel)
    for _ in range(8):
        fd = syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd), ctypes.c_char_p(path),
                     ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
            _openat2_state["missing"] = True
            return None
        if err in (errno.ELOOP, errno.EXDEV):
            raise _Escape()
        if err in (errno.EAGAIN, errno.EINTR):  # a rename raced the lookup: try again
            continue
        raise OSError(err, os.strerror(err))
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened")


def _walk(dir_fd: int, rel: str) -> int:
    """The fallback.

    One component at a time, each directory opened with O_NOFOLLOW relative to its parent's fd, so
    no symlink anywhere on the path is followed."""
    parts = [p for p in rel.split("/") if p not in ("", ".")] or ["."]
    if ".." in parts:
        raise _Escape()
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink (or a file) here
                    raise _Escape() from None
                raise
            os.close(fd)
            fd = nxt
        try:
            return os.open(parts[-1], _OPEN_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Escape() from None
            raise
    finally:
        os.close(fd)


def open_beneath(root: str, rel: str) -> int:
    """A read-only fd of root/rel that cannot resolve outside root.

    _Escape if the path holds a symlink or climbs out, OSError otherwise."""
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _openat2(dir_fd, rel)
        return fd if fd is not None else _walk(dir_fd, rel)
    finally:
        os.close(dir_fd)


def _read_allowed_file(index: int, path: str, allowed_dirs: Sequence[str],
                       max_bytes: int) -> bytes:
    if not allowed_dirs:
        raise _bad(index, "file paths and file:// URLs are disabled on this server (start it "
                          "with --allowed-media-dir DIR)")
    if "\0" in path:
        raise _bad(index, "path contains a NUL byte")
    if not os.path.isabs(path):
        raise _bad(index, f"file path must be absolute, got {path!r}")
    # Lexical only: which allowed directory the path names. The kernel (or the walk) then
    # resolves the rest below that directory's fd; nothing is looked up by name twice.
    norm = os.path.normpath(path)
    outside = _bad(index, f"path {path!r} is outside the allowed media directories (symbolic "
                          "links are not followed)")
    found = None
    for d in allowed_dirs:
        for root in dict.fromkeys((os.path.normpath(os.path.abspath(d)), os.path.realpath(d))):
            if _inside(norm, root):
                found = (os.path.realpath(d), os.path.relpath(norm, root))
                break
        if found:
            break
    if found is None:
        raise outside
    try:
        fd = open_beneath(*found)
    except _Escape:
        raise outside from None
    except FileNotFoundError:
        raise _bad(index, f"no such file: {path!r}") from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise _bad(index, f"no such file: {path!r}") from None
        raise _bad(index, f"cannot open {path!r}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _bad(index, f"not a regular file: {path!r}")
        if st.st_size > max_bytes:
            raise _bad(index, f"file {path!r} has {st.st_size} bytes, more than the "
                              f"{max_bytes}-byte message limit")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _bad(index, f"cannot read {path!r}: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not data:
        raise _bad(index, f"empty file: {path!r}")
    return data
