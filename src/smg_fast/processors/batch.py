"""A processor call's images between sizing and computing, written once into a destination.

``PlannedBatch``: headers read, output sized, nothing decoded; ``PreparedBatch``: decoded. Each
writes into a destination the caller may choose before the tensor is written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any, Protocol

import numpy as np

from .. import _native
from .._dtypes import DTYPES
from ..errors import OutputTooLargeError
from ..imaging import decoders
from ..imaging.media import ImageHeader, Pixels
from .config import ProcessorConfig
from .decode_pool import decode_all, decode_iter
from .plan import Plan
from .tiles import square_source

# No output past this can be allocated (x86-64 and arm64 user address spaces are smaller): an
# absurd min_pixels gets a typed error, not a failed allocation.
ADDRESSABLE = 1 << 48
_RGB = _native.PixelFormat.RGB


class Planner(Protocol):
    """What a batch asks of the processor that made it (processors/processor.py)."""

    config: ProcessorConfig

    def plan(self, width: int, height: int, index: int = 0) -> Plan: ...

    def pipeline(self, dtype: str) -> _native.Pipeline: ...

    def _layout(self) -> tuple[int, int]: ...

    def _pixel_shape(self, rows: int) -> tuple[int, ...]: ...

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray: ...

    def canvas(self, plans: list[Plan]) -> tuple[int, int, int] | None: ...

    presizes: bool

    def presize(self, src: np.ndarray, fmt: Any) -> tuple[np.ndarray, Any]: ...

    def pad_batch(self, plans: list[Plan]) -> list[Plan]: ...

    def finish(self, pipe: _native.Pipeline, plan: Plan, flat: np.ndarray, offset: int) -> None: ...


class _Sized:
    """Output geometry shared by a planned and a prepared batch."""

    def _size(self, proc: Planner, plans: list[Plan], dtype: str) -> None:
        self._proc = proc
        plans = proc.pad_batch(plans)
        self.plans = plans
        self.dtype = dtype
        self.np_dtype = DTYPES[dtype][1]
        merge, temporal = proc._layout()
        p = proc.config.patch_size
        # whole channel-first images padded to one (3, H, W) canvas: one "row" per image
        self.canvas = proc.canvas(plans)
        if self.canvas is not None:
            self.row_elems = int(np.prod(self.canvas))
            self.rows = [1] * len(plans)
            self.shape = (len(plans), *self.canvas)
        else:
            self.row_elems = 3 * temporal * p * p
            self.rows = [pl.rows for pl in plans]
            self.shape = proc._pixel_shape(sum(self.rows))
        self.nbytes = sum(self.rows) * self.row_elems * self.np_dtype.itemsize
        self.grid = np.array([pl.thw for pl in plans], dtype=np.int64)
        self.num_tokens = proc.tokens_for_grid(self.grid)

    def item_shape(self, index: int) -> tuple[int, ...]:
        """Shape of one image's slice of pixel_values."""
        if self.canvas is not None:
            return (1, *self.canvas)
        return self._proc._pixel_shape(self.rows[index])

    def check_nbytes(self, limit: int) -> None:
        """Raises OutputTooLargeError when the output exceeds limit bytes.

        The error names the first image whose output crosses the limit."""
        if self.nbytes <= limit:
            return
        per_row = self.row_elems * self.np_dtype.itemsize
        total = 0
        for i, rows in enumerate(self.rows):
            total += rows * per_row
            if total > limit:
                raise OutputTooLargeError(i, self.nbytes, limit)


class PlannedBatch(_Sized):
    """Images whose headers were read and whose output is sized; nothing decoded yet.

    The sizes do not depend on an EXIF orientation the header did not show (a rotation by 90
    degrees swaps the grid's sides, never its cell count), so ``nbytes`` is exact.
    """

    def __init__(self, proc: Planner, headers: list[ImageHeader], plans: list[Plan],
                 dtype: str) -> None:
        self._headers = headers
        self.decode_seconds = 0.0  # see write_into
        # Memory decoding these images may hold at once (a batch keeps them all decoded), planned
        # from their headers as the output is.
        self.decode_bytes = sum(h.decode_bytes for h in headers)
        self._size(proc, plans, dtype)

    def decode(self) -> PreparedBatch:
        """Decodes every image (once; the headers are consumed either way)."""
        try:
            pixels = decode_all(self._headers)
        finally:
            self.close()
        proc = self._proc
        plans = [proc.plan(px.width, px.height, i) for i, px in enumerate(pixels)]
        batch = PreparedBatch(proc, pixels, plans, self.dtype)
        if batch.nbytes != self.nbytes:  # cannot happen: decode() checked every size
            raise RuntimeError("an image's output size changed in decoding")
        return batch

    @property
    def decodes_while_computing(self) -> bool:
        """Whether write_into decodes while it computes, rather than decoding first.

        It does for one JPEG the native decoder takes: its decode overlaps its own resize."""
        return (len(self._headers) == 1 and self._headers[0].decode_running is not None
                and not self._proc.presizes
                and decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG)

    def compute(self) -> np.ndarray:
        """Decodes and computes every image into a new pooled buffer, as write_into does.

        The buffer is shaped like pixel_values."""
        try:
            self.check_nbytes(ADDRESSABLE)
            flat = _native.pooled_empty(self.nbytes, huge_pages=False).view(self.np_dtype)
        except BaseException:
            self.close()
            raise
        return self.write_into(flat)

    def write_into(self, out: np.ndarray) -> np.ndarray:
        """Decodes and computes every image into ``out`` (PreparedBatch.write_into's rules).

        Image i's native work overlaps the decodes of the images after it, or, for one JPEG, its
        own decode. Consumes the headers; the first failing image raises, as decode() does, and
        then what ``out`` holds is unspecified. Sets ``decode_seconds``: the decoding's share of
        the call (a JPEG's own decode CPU time where it overlapped its resize; the waits for
        decoded images otherwise)."""
        self.decode_seconds = 0.0
        try:
            flat = _destination(out, self, self.nbytes)
            pipe = self._proc.pipeline(self.dtype)
            if len(self._headers) == 1 and not self._proc.presizes and (
                    running := self._headers[0].decode_running):
                # One JPEG: its decode overlaps its own resize (a batch overlaps images instead).
                pl = self.plans[0]
                took = np.zeros(1)
                if self.canvas is None:
                    done = running(lambda src, data: _run_plan(pipe, src, pl, flat, 0, _RGB,
                                                               jpeg=data, decode_seconds=took))
                else:
                    scratch = _scratch(pipe, pl, flat.dtype)
                    done = running(lambda src, data: pipe.run(
                        src, pl.resize_w, pl.resize_h, pl.grid_h, pl.grid_w, scratch, 0,
                        fmt=_RGB, jpeg=data, decode_seconds=took))
                self.decode_seconds = float(took[0])  # a failed decode's time counts too
                if done:
                    if self.canvas is None:
                        self._proc.finish(pipe, pl, flat, 0)
                        _zero_pad(flat, 0, pl, self.row_elems)
                    else:
                        _lay_out(scratch, pipe.patch, pl, flat, 0, self.canvas)
                    return flat[:self.nbytes // self.np_dtype.itemsize].reshape(self.shape)
            offset = 0
            with closing(decode_iter(self._headers)) as decoded:
                for i, px in enumerate(self._timed(decoded)):
                    pl = self._proc.plan(px.width, px.height, i)
                    if pl.parts != self.plans[i].parts:  # cannot happen (see decode())
                        raise RuntimeError("an image's output size changed in decoding")
                    _run_image(pipe, px, self.plans[i], flat, offset, self)
                    offset += self.rows[i] * self.row_elems
            return flat[:offset].reshape(self.shape)
        finally:
            self.close()

    def _timed(self, decoded: Iterator[Pixels]) -> Iterator[Pixels]:
        """decoded, adding the time each next() takes to decode_seconds."""
        while True:
            t0 = time.perf_counter()
            px = next(decoded, None)
            self.decode_seconds += time.perf_counter() - t0
            if px is None:
                return
            yield px

    def close(self) -> None:
        """Releases what the headers hold open (files) without decoding."""
        for h in self._headers:
            h.close()

    def __enter__(self) -> PlannedBatch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PreparedBatch(_Sized):
    """Images decoded and sized for one processor call; ``write_into`` runs the native core."""

    def __init__(self, proc: Planner, pixels: list[Pixels], plans: list[Plan],
                 dtype: str) -> None:
        self._pixels = pixels  # each read in its own format: converted while the core reads
        self._size(proc, plans, dtype)

    @property
    def pixels(self) -> list[Pixels]:
        """The decoded images, each in the format the native core reads it in."""
        return self._pixels

    def compute(self) -> np.ndarray:
        """pixel_values in a new buffer from the native pools, shaped like pixel_values.

        The pools pre-fault the buffer when the same sizes came before; a new one is not advised
        for huge pages (callers such as an engine's cache keep outputs, and under THP
        defrag=madvise a huge-page first touch may compact memory synchronously)."""
        return self.write_into(_native.pooled_empty(self.nbytes, huge_pages=False)
                               .view(self.np_dtype))

    def write_into(self, out: np.ndarray, index: int | None = None) -> np.ndarray:
        """Writes all images (or only image ``index``) into ``out``; returns the filled part.

        ``out`` is a writable C-contiguous array of this batch's dtype with at least that many
        elements; the part returned is shaped like pixel_values."""
        which = range(len(self.plans)) if index is None else [index]
        flat = _destination(out, self, sum(self.rows[i] for i in which) * self.row_elems
                            * self.np_dtype.itemsize)
        pipe = self._proc.pipeline(self.dtype)
        offset = 0
        for i in which:
            pl = self.plans[i]
            _run_image(pipe, self._pixels[i], pl, flat, offset, self)
            offset += self.rows[i] * self.row_elems
        shape = self.shape if index is None else self.item_shape(index)
        return flat[:offset].reshape(shape)


def _run_image(pipe: _native.Pipeline, px: Pixels, plan: Plan, flat: np.ndarray, offset: int,
               batch: _Sized) -> None:
    """Computes one decoded image into flat at element offset, with its padding."""
    src, fmt = batch._proc.presize(px.array, px.fmt)
    if batch.canvas is None:
        _run_plan(pipe, src, plan, flat, offset, fmt)
        batch._proc.finish(pipe, plan, flat, offset)
        _zero_pad(flat, offset, plan, batch.row_elems)
        return
    scratch = _scratch(pipe, plan, flat.dtype)
    pipe.run(src, plan.resize_w, plan.resize_h, plan.grid_h, plan.grid_w, scratch, 0, fmt=fmt)
    _lay_out(scratch, pipe.patch, plan, flat, offset, batch.canvas)


def _scratch(pipe: _native.Pipeline, plan: Plan, dtype: np.dtype) -> np.ndarray:
    """A pooled buffer for the native core's patches of one canvas image."""
    return _native.pooled_empty(plan.grid_h * plan.grid_w * pipe.row_elems * dtype.itemsize,
                                huge_pages=False).view(dtype)


def _lay_out(scratch: np.ndarray, p: int, plan: Plan, flat: np.ndarray, offset: int,
             canvas_shape: tuple[int, int, int]) -> None:
    """Lays one image's (3, p, p) patches out as its channel-first image on its canvas.

    The patches are row-major in scratch; the image goes at the top left of the canvas in flat
    at element offset, the rest of the canvas zeros (one native pass)."""
    _native.patches_to_planar(scratch, plan.grid_h, plan.grid_w, p, flat, offset,
                              canvas_shape[1], canvas_shape[2])


def _zero_pad(flat: np.ndarray, offset: int, plan: Plan, row_elems: int) -> None:
    """Zeroes the plan's padding rows after its grid rows, written from element offset on."""
    if plan.pad_rows:
        start = offset + plan.cells * row_elems
        flat[start:start + plan.pad_rows * row_elems] = 0


def _run_plan(pipe: _native.Pipeline, src: np.ndarray, plan: Plan, flat: np.ndarray,
              offset: int, fmt: Any, **jpeg: Any) -> Any:
    """Runs every part of plan from src into flat at offset; the first part's result.

    ``jpeg`` (the bytes and decode_seconds) goes to the first part, whose decode fills src
    while it computes; the other parts read src only once that decode took the whole image."""
    first, *rest = plan.parts
    offset += plan.lead_rows * pipe.row_elems  # written by the family's finish()
    if jpeg and (first.fill is not None or first.placed):
        return decoders.JPEG_DECLINED  # the square (a placement) needs the whole image decoded
    got = _run_part(pipe, src, first, flat, offset, fmt, **jpeg)
    if rest and jpeg and got != decoders.JPEG_WHOLE:
        return got  # the caller decodes again and recomputes every part
    row = pipe.row_elems
    offset += first.grid_h * first.grid_w * row
    for part in rest:
        _run_part(pipe, src, part, flat, offset, fmt)
        offset += part.grid_h * part.grid_w * row
    return got


def _run_part(pipe: _native.Pipeline, src: np.ndarray, part: Plan, flat: np.ndarray,
              offset: int, fmt: Any, **jpeg: Any) -> Any:
    """Runs one part of a plan into flat at offset: placed, or from a squared source, if said.

    A placed part's resize sits at (left, top) on its grid's canvas, which the native core
    pads with pixel 0 while it writes the tiles."""
    if part.fill is not None:
        return pipe.run(square_source(src, fmt, part.fill), part.resize_w, part.resize_h,
                        part.grid_h, part.grid_w, flat, offset, fmt=_RGB)
    if part.placed:
        return pipe.run(src, part.resize_w, part.resize_h, part.grid_h, part.grid_w, flat, offset,
                        fmt=fmt, left=part.left, top=part.top)
    return pipe.run(src, part.resize_w, part.resize_h, part.grid_h, part.grid_w, flat, offset,
                    fmt=fmt, **jpeg)


def _destination(out: np.ndarray, batch: _Sized, nbytes: int) -> np.ndarray:
    """out flattened, once checked to be a writable C-contiguous array of batch's dtype.

    It must hold at least nbytes."""
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("destination must be a writable C-contiguous array")
    flat = out.reshape(-1)
    if flat.dtype != batch.np_dtype:
        raise ValueError(f"destination dtype {flat.dtype} does not hold {batch.dtype}")
    if flat.nbytes < nbytes:
        raise ValueError(f"destination holds {flat.nbytes} bytes, the output needs {nbytes}")
    return flat


__all__ = ["ADDRESSABLE", "PlannedBatch", "Planner", "PreparedBatch"]
