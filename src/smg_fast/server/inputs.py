"""MediaItem -> encoded image bytes: inline data, data: URLs, and files under the allowed
directories (opened without following a final symlink, regular files only, size-capped)."""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
import urllib.parse
from collections.abc import Sequence
from typing import Any

import grpc

from .errors import RequestError

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
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise _bad(index, "malformed data: URL (no ',')")
    if header.lower().endswith(";base64"):
        try:
            data = base64.b64decode(payload.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _bad(index, f"malformed base64 in data: URL ({exc})") from None
    else:
        data = urllib.parse.unquote_to_bytes(payload)
    if not data:
        raise _bad(index, "data: URL with no data")
    return data


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def _read_allowed_file(index: int, path: str, allowed_dirs: Sequence[str],
                       max_bytes: int) -> bytes:
    if not allowed_dirs:
        raise _bad(index, "file paths and file:// URLs are disabled on this server (start it "
                          "with --allowed-media-dir DIR)")
    if "\0" in path:
        raise _bad(index, "path contains a NUL byte")
    if not os.path.isabs(path):
        raise _bad(index, f"file path must be absolute, got {path!r}")
    real = os.path.realpath(path)
    roots = [os.path.realpath(d) for d in allowed_dirs]
    if not any(_inside(real, r) for r in roots):
        raise _bad(index, f"path {path!r} is outside the allowed media directories")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _bad(index, f"no such file: {path!r}") from None
    except OSError as exc:
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
