"""One item's encoder input on its way out of the server.

A batch (or a planned video) still to be computed (written straight into its destination, once)
or a pixel-cache entry already computed (copied there)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..processors.batch import PlannedBatch, PreparedBatch
from ..processors.video import PlannedVideo
from .cache import CacheEntry


@dataclass
class Tensor:
    """One item's encoder input on its way out, computed or still to be computed.

    Still to be computed: a batch, written straight into its destination; already computed: a
    pixel-cache entry, copied there."""

    nbytes: int
    np_dtype: np.dtype
    shape: tuple[int, ...]
    grid: tuple[int, int, int]
    num_tokens: int
    hit: bool = False
    # A prepared batch (decoded), or a planned one (or video) that decodes while it computes: a
    # write consumes that, so writing again (an RDMA lease lost after its write falls back to
    # shm) takes a fresh one from replan.
    batch: PreparedBatch | PlannedBatch | PlannedVideo | None = None
    pixels: np.ndarray | None = None
    replan: Callable[[], PlannedBatch | PlannedVideo] | None = None
    decoded: float | None = None  # a planned batch: its writes' decode_seconds
    video: dict[str, Any] | None = None  # a video's metadata (frames_indices, fps, ...)
    _spent: bool = field(default=False, init=False, repr=False)

    @classmethod
    def of_batch(cls, batch: PreparedBatch | PlannedBatch | PlannedVideo,
                 replan: Callable[[], PlannedBatch | PlannedVideo] | None = None) -> Tensor:
        """The tensor a (prepared or planned) batch of one image, or a planned video, computes."""
        g = batch.grid[0]
        video = batch.metadata if isinstance(batch, PlannedVideo) else None
        return cls(batch.nbytes, batch.np_dtype, tuple(batch.shape),
                   (int(g[0]), int(g[1]), int(g[2])), int(batch.num_tokens[0]), batch=batch,
                   replan=replan, video=video)

    @classmethod
    def of_entry(cls, entry: CacheEntry, hit: bool) -> Tensor:
        """The tensor of a pixel-cache entry (``hit``: it was in the cache)."""
        px = entry.pixels
        return cls(entry.nbytes, px.dtype, tuple(px.shape), entry.grid, entry.num_tokens,
                   hit=hit, pixels=px, video=entry.video)

    def _batch(self) -> PreparedBatch | PlannedBatch | PlannedVideo:
        """The batch to write now: a planned one once, then fresh ones from replan."""
        assert self.batch is not None
        if isinstance(self.batch, PreparedBatch):
            return self.batch
        if self._spent:
            if self.replan is None:
                raise RuntimeError("a planned tensor written twice without a replan")
            return self.replan()
        self._spent = True
        return self.batch

    def write(self, dst: np.ndarray) -> None:
        """Writes the tensor into dst, a flat writable array of its dtype (or bytes)."""
        if self.pixels is None:
            batch = self._batch()
            batch.write_into(dst)
            self._note(batch)
        else:
            dst.reshape(-1).view(np.uint8)[:self.nbytes] = self.pixels.reshape(-1).view(np.uint8)

    def array(self) -> np.ndarray:
        """The tensor as an array (computed into a pooled buffer if it is not yet)."""
        if self.pixels is None:
            batch = self._batch()
            self.pixels = batch.compute()
            self._note(batch)
        return self.pixels

    def _note(self, batch: PreparedBatch | PlannedBatch | PlannedVideo) -> None:
        """Adds a planned batch's (or video's) decode time to ``decoded``."""
        if not isinstance(batch, PreparedBatch):  # every write's decode (a re-plan decodes again)
            self.decoded = (self.decoded or 0.0) + batch.decode_seconds
