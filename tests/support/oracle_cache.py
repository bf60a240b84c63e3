"""Reference outputs cached on disk, keyed by the exact inputs and the reference's versions.

The oracles (transformers' processors in this environment, the torchvision venv) are the
slowest part of the parity suites, and test_isa_paths reruns those suites once per kernel
selection: the first run computes each reference with the real oracle and stores its arrays;
later runs (the reruns, a warm CI) compare against those arrays. The key is a sha256 over the
inputs' bytes (pixels, mode, palette, info of a PIL image; dtype, shape and bytes of an array),
the oracle's configuration and call options, and the versions of everything that computes it,
so a changed input, option or version is a new entry, never a stale one. An input the key
cannot describe exactly is not cached (the oracle runs).

A read marks its entry used (its modification time); a whole-suite run that passes deletes the
entries it did not use (``prune``, from tests/support/suite_markers.py), so entries for inputs,
options or versions the tests no longer ask for do not pile up on a CI host.

SMG_FAST_ORACLE_CACHE: the directory (default ~/.cache/smg-fast/oracle); ``off`` disables it.
"""

from __future__ import annotations

import collections
import hashlib
import numbers
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CACHE_ENV = "SMG_FAST_ORACLE_CACHE"
STATS: collections.Counter[str] = collections.Counter()  # "hit", "computed", "uncacheable"


class Uncacheable(TypeError):
    """An input the key cannot describe exactly."""


def cache_dir() -> Path | None:
    """Where the references live, or None when caching is off."""
    value = os.environ.get(CACHE_ENV, "")
    if value.lower() == "off":
        return None
    return Path(value) if value else Path.home() / ".cache" / "smg-fast" / "oracle"


def _feed(h: Any, obj: Any) -> None:
    """Feeds obj into h, tagged by type, so different values never share a byte stream."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, numbers.Rational):  # e.g. an EXIF IFDRational in a PIL image's info
        h.update(f"{type(obj).__name__}:{obj.numerator}/{obj.denominator};".encode())
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        h.update(f"bytes:{len(data)};".encode())
        h.update(data)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}:{len(obj)}[".encode())
        for v in obj:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(obj, dict):
        h.update(f"dict:{len(obj)}{{".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k)
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, np.ndarray):
        h.update(f"ndarray:{obj.dtype.str}:{obj.shape};".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, Image.Image):
        obj.load()  # a lazily opened file: its pixels, palette and info as the oracle sees them
        h.update(f"image:{obj.mode}:{obj.size};".encode())
        _feed(h, None if obj.palette is None else (obj.palette.mode, obj.palette.tobytes()))
        _feed(h, dict(obj.info))
        h.update(obj.tobytes())
    else:
        raise Uncacheable(f"cannot key a {type(obj).__name__}")


def key_of(*parts: Any) -> str:
    """The sha256 hex digest of parts; raises Uncacheable."""
    h = hashlib.sha256()
    for part in parts:
        _feed(h, part)
    return h.hexdigest()


def hf_processor_call(proc: Any, images: Any, **kwargs: Any) -> dict[str, np.ndarray]:
    """transformers' processor proc on images (return_tensors="np").

    Its pixel_values and image_grid_thw, cached."""
    import json

    def compute() -> dict[str, np.ndarray]:
        out = proc(images, return_tensors="np", **kwargs)
        return {k: np.asarray(out[k]) for k in ("pixel_values", "image_grid_thw")}

    config = json.dumps(proc.to_dict(), sort_keys=True, default=repr)
    return cached("transformers", (type(proc).__module__, type(proc).__qualname__, config,
                                   images, kwargs, versions("transformers", "PIL", "numpy")),
                  compute)


def versions(*modules: str) -> dict[str, str]:
    """The versions of the named modules (part of every key)."""
    import importlib

    return {m: str(getattr(importlib.import_module(m), "__version__", "?")) for m in modules}


def cached(kind: str, parts: tuple, compute: Callable[[], dict[str, np.ndarray]]
           ) -> dict[str, np.ndarray]:
    """compute()'s arrays, from the cache when an entry for (kind, parts) exists."""
    root = cache_dir()
    try:
        key = key_of(kind, *parts) if root is not None else None
    except Uncacheable:
        key = None
    if key is None:
        STATS["uncacheable" if root is not None else "computed"] += 1
        return compute()
    path = root / kind / key[:2] / f"{key}.npz"
    got = load(path)
    if got is not None:
        STATS["hit"] += 1
        return got
    out = compute()
    store(path, out)
    STATS["computed"] += 1
    return out


def cached_batch(kind: str, shared: tuple, jobs: list,
                 compute: Callable[[list], list[dict[str, np.ndarray]]]
                 ) -> list[dict[str, np.ndarray]]:
    """Per job, the arrays compute([job, ...]) returns for it.

    Jobs without an entry under (kind, shared, job) go to one compute() call together."""
    root = cache_dir()
    paths: list[Path | None] = []
    for job in jobs:
        try:
            key = key_of(kind, *shared, job) if root is not None else None
        except Uncacheable:
            key = None
        paths.append(None if key is None else root / kind / key[:2] / f"{key}.npz")
    out: list[dict[str, np.ndarray] | None] = [None if p is None else load(p) for p in paths]
    todo = [i for i, got in enumerate(out) if got is None]
    STATS["hit"] += len(jobs) - len(todo)
    if todo:
        for i, got in zip(todo, compute([jobs[i] for i in todo]), strict=True):
            out[i] = got
            if paths[i] is not None:
                store(paths[i], got)
                STATS["computed"] += 1
            else:
                STATS["uncacheable" if root is not None else "computed"] += 1
    return out  # type: ignore[return-value]


def load(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays stored at path, or None (absent or unreadable: the oracle runs again)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError):
        return None
    try:
        os.utime(path)  # used now: prune() keeps it
    except OSError:
        pass  # a read-only cache is still read
    return got


def store(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Writes arrays to path atomically (a reader sees the whole entry or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_ENTRY = re.compile(r"[0-9a-f]{64}\.npz|tmp[A-Za-z0-9_]+\.tmp")


def _entries(root: Path) -> Iterator[Path]:
    """The files laid out as this cache writes them, in real directories only.

    kind/<2 hex>/<sha256>.npz, or a write's mkstemp .tmp: a symlinked folder and any other
    file are not the cache's, whatever folder SMG_FAST_ORACLE_CACHE names."""
    for kind in root.iterdir():
        if kind.is_symlink() or not kind.is_dir():
            continue
        for shard in kind.iterdir():
            if shard.is_symlink() or not shard.is_dir() or not re.fullmatch(r"[0-9a-f]{2}",
                                                                              shard.name):
                continue
            for path in shard.iterdir():
                if _ENTRY.fullmatch(path.name) and (path.suffix == ".tmp"
                                                    or path.name.startswith(shard.name)):
                    yield path


def prune(since: float) -> tuple[int, int]:
    """Deletes the entries no read or write has touched since ``since`` (a time.time()).

    Returns (entries, bytes) deleted; leftover temporary files of interrupted writes go too.
    Only files named and placed as the cache writes them are candidates (_entries)."""
    root = cache_dir()
    if root is None or not root.is_dir():
        return 0, 0
    entries = size = 0
    for path in _entries(root):
        try:
            st = path.lstat()
            if st.st_mtime >= since or not stat.S_ISREG(st.st_mode):
                continue
            path.unlink()
        except OSError:
            continue  # gone already, or not ours to delete
        entries += 1
        size += st.st_size
    return entries, size
