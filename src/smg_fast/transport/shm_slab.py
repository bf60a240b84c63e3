"""One reused shm segment, its size classes, and how many may be open at once.

A reused segment is a "slab": see :mod:`smg_fast.transport.shm_reuse`."""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from .shm_segment import GRANULE, soft_nofile

HEADER = 4096  # the tensor's offset in a reused segment: page aligned, for consumers that map
PAGE = mmap.PAGESIZE


class Slab:
    """One reusable file.

    The producer's descriptor and mapping, its private name, and the public name and tensor size of
    its current delivery."""

    __slots__ = ("fd", "mm", "capacity", "ino", "key", "name", "nbytes", "dirty", "idle_since",
                 "uses")

    def __init__(self, fd: int, mm: mmap.mmap, capacity: int, ino: int, key: str) -> None:
        self.fd, self.mm, self.capacity, self.ino, self.key = fd, mm, capacity, ino, key
        self.name = ""
        self.nbytes = 0
        self.dirty = HEADER  # end of the bytes this process may have written (the rest: zeros)
        self.idle_since = 0.0
        self.uses = 0

    offset = HEADER

    def array(self, dtype: Any = np.uint8) -> np.ndarray:
        """The tensor's bytes (nbytes after the header) as a writable array of dtype."""
        dt = np.dtype(dtype)
        return np.frombuffer(self.mm, dtype=dt, count=self.nbytes // dt.itemsize, offset=HEADER)

    def released(self) -> bool:
        """Whether its public name is gone (only the private one, if any, is left)."""
        try:
            return os.fstat(self.fd).st_nlink <= 1
        except OSError:
            return True


def size_class(nbytes: int, granule: int = GRANULE) -> int:
    """The tmpfs bytes a slab for an nbytes tensor takes.

    ``HEADER`` + nbytes rounded up to a quarter of its power of two (at least a page, at most
    ``granule``), so a class wastes under a quarter (and under one granule) while near sizes still
    share slabs."""
    total = HEADER + max(int(nbytes), 1)
    step = min(granule, max(PAGE, 1 << max(total.bit_length() - 3, 0)))
    return -(-total // step) * step


def default_max_open() -> int:
    """Live slabs allowed.

    An eighth of the soft ``RLIMIT_NOFILE`` (two descriptors each, so a quarter of the process's
    descriptors), at least 4."""
    return max(4, soft_nofile() // 8)


__all__ = ["GRANULE", "HEADER", "PAGE", "Slab", "default_max_open", "size_class"]
