"""The processor machinery shared by every family: input handling, one output allocation per
call, one native call per image writing straight into its slice of the output."""

from __future__ import annotations

import dataclasses
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from .._dtypes import DTYPES, parse_dtype, to_torch
from ..call_inputs import UNIT, prepare_inputs
from ..call_options import CallOptions, parse_options
from ..config import ProcessorConfig, coerce_fields, validate_common
from ..errors import InvalidImageError, OutputTooLargeError, UnsupportedCallError
from ..imaging import decoders
from ..imaging.media import ImageHeader, ImageInput, Pixels, open_image
from ..resample import native_filter, native_pass_order
from . import torchvision as tv
from .decode_pool import decode_all, decode_iter

LUT_HF = _native.LutRecipe.HF_RESCALE_NORMALIZE  # f32(f32(f64(u) * rescale) - mean) / std
# Kimi upstream: x = f32(u / 255.0); x = f32(x - mean); y = f32(x * (1.0 / std)), each in float64
LUT_KIMI = _native.LutRecipe.KIMI_DIVIDE_MULTIPLY
# No output past this can be allocated (x86-64 and arm64 user address spaces are smaller): an
# absurd min_pixels gets a typed error, not a failed allocation.
_ADDRESSABLE = 1 << 48
_MAX_VARIANTS = 8  # processors for call-time options, kept per processor
_RGB = _native.PixelFormat.RGB


@dataclass(frozen=True)
class Plan:
    """Sizes for one image: resize target, then the patch grid (which may include padding)."""

    resize_w: int
    resize_h: int
    grid_h: int
    grid_w: int


class ProcessorOutput(dict):
    """HF-style result: a dict with attribute access (``out.pixel_values``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Processor(ABC):
    """Turns images into a family's encoder inputs, bit-identical to its reference."""

    lut_recipe: _native.LutRecipe = LUT_HF
    # Encoded bytes and paths are opened as transformers' load_image does (EXIF transpose,
    # alpha composited onto white); False: plain convert("RGB"), as upstream Kimi code does.
    load_like_transformers: bool = True
    per_request_pixels: bool = False  # a server request may narrow min_pixels / max_pixels
    backend_reason: str = ""  # why load_processor chose the backend (repr shows it)

    def __init__(self, config: ProcessorConfig) -> None:
        self.config = config
        self._resampler = _native.Resampler.PILLOW
        self._torchvision = config.backend == tv.NAME
        if self._torchvision:  # the same for every family: see processors/torchvision.py
            self.lut_recipe = tv.LUT_TORCH
            self._resampler = tv.RESAMPLER
            self.load_like_transformers = True
        self._pipelines: dict[str, _native.Pipeline] = {}
        self._variants: dict[tuple[tuple[str, Any], ...], Processor] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        why = f" ({self.backend_reason})" if self.backend_reason else ""
        return f"{type(self).__name__}(backend={self.config.backend!r}{why}, {self.config})"

    # ---- per-family geometry ----

    @abstractmethod
    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        """Sizes for a width x height image; raises InvalidImageError for impossible sizes."""

    @abstractmethod
    def _layout(self) -> tuple[int, int]:
        """(merge, temporal) of the native patch layout."""

    @abstractmethod
    def _pixel_shape(self, rows: int) -> tuple[int, ...]:
        """Shape of pixel_values for `rows` patches."""

    # ---- public API ----

    def grid(self, width: int, height: int) -> tuple[int, int, int]:
        """(t, h, w) of ``image_grid_thw`` for an image of this size, without pixels."""
        p = self.plan(int(width), int(height))
        return (1, p.grid_h, p.grid_w)

    def num_tokens(self, width: int, height: int) -> int:
        """LLM tokens for an image of this size: grid cells / merge_size^2."""
        _, gh, gw = self.grid(width, height)
        return gh * gw // (self.config.merge_size**2)

    def pipeline(self, dtype: str) -> _native.Pipeline:
        """The native pipeline for one output dtype ("float32", "bfloat16", "float16"): filter,
        normalization table and patch layout validated once, then cached. ``.lut`` is its
        3 x 256 normalization table."""
        pipe = self._pipelines.get(dtype)
        if pipe is None:
            cfg = self.config
            merge, temporal = self._layout()
            with self._lock:
                pipe = self._pipelines.get(dtype)
                if pipe is None:
                    pipe = _native.Pipeline(
                        recipe=self.lut_recipe, rescale=cfg.rescale_factor,
                        mean=list(cfg.image_mean), std=list(cfg.image_std),
                        dtype=DTYPES[dtype][0], filter=native_filter(cfg.resample),
                        pass_order=native_pass_order(cfg.pass_order), patch=cfg.patch_size,
                        merge=merge, temporal=temporal, resampler=self._resampler)
                    self._pipelines[dtype] = pipe
        return pipe

    def __call__(
        self,
        images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
        return_tensors: str | None = "np",
        dtype: Any = "float32",
        *,
        channels_first_wins: bool = False,
        **options: Any,
    ) -> ProcessorOutput:
        """Preprocesses one image or a list of images (nested lists are flattened as transformers
        does; PIL images, numpy arrays and torch tensors HWC or CHW, uint8 or float, bytes,
        paths, ``data:`` URLs and base64 strings).

        Returns ``pixel_values`` (all images' patches concatenated in order), ``image_grid_thw``
        (int64, one [t, h, w] row per image) and ``num_tokens`` (int64 per image). For
        ``dtype="bfloat16"`` with numpy output the array is uint16 holding bfloat16 bits.
        ``options``: transformers' call-time options (``size``, ``min_pixels``, ``max_pixels``,
        ``do_rescale``, ``do_normalize``, ``image_mean``, ``image_std``, ``patch_size``,
        ``merge_size``, ``temporal_patch_size``, ``do_convert_rgb``, ``input_data_format``, ...);
        one smg-fast cannot honour raises an error naming it. An array whose first and last
        axes could both be channels is read as HWC unless ``channels_first_wins`` (transformers'
        guess, which ``smg_fast.hf`` uses) or ``input_data_format`` says otherwise.
        """
        return_tensors = getattr(return_tensors, "value", return_tensors)
        if return_tensors not in (None, "np", "pt"):
            raise ValueError(f"return_tensors must be 'np' or 'pt', got {return_tensors!r}")
        opts = parse_options(self.config, options)
        items = prepare_inputs(images, opts, self._torchvision, channels_first_wins)
        if not items:
            raise ValueError("no images given")
        parts, grids, tokens = [], [], []
        start = 0
        while start < len(items):  # runs of images with the same effective config
            proc = self._variant(opts, items[start].scale)
            stop = start + 1
            while stop < len(items) and items[stop].scale == items[start].scale:
                stop += 1
            # Decoding overlaps the native work (PlannedBatch.compute), as no destination
            # has to be chosen first here.
            batch = proc.plan_batch([it.item for it in items[start:stop]], dtype)
            parts.append(batch.compute())
            grids.append(batch.grid)
            tokens.append(batch.num_tokens)
            dtype_name = batch.dtype
            start = stop
        pixel_values = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return self._wrap(pixel_values, np.concatenate(grids), np.concatenate(tokens),
                          return_tensors, dtype_name)

    def _variant(self, opts: CallOptions, scale: str) -> Processor:
        """This processor, or one whose config has a call's overrides (cached, a few)."""
        overrides = dict(opts.overrides)
        if scale == UNIT:  # transformers' 1/255 after the resize, then no rescale (checked)
            overrides["rescale_factor"] = 1 / 255
        if not overrides:
            return self
        key = tuple(sorted(overrides.items()))
        with self._lock:
            hit = self._variants.get(key)
        if hit is not None:
            return hit
        try:  # an override smg-fast's config refuses: transformers' class decides (hf)
            cfg = dataclasses.replace(self.config, **coerce_fields(overrides))
            validate_common(cfg)
        except (TypeError, ValueError) as exc:
            raise UnsupportedCallError(str(exc)) from None
        if cfg.min_pixels is not None and not 0 < cfg.min_pixels <= (cfg.max_pixels or 0):
            raise UnsupportedCallError("need 0 < min_pixels <= max_pixels")
        proc = type(self)(cfg)
        with self._lock:
            self._variants[key] = proc
            while len(self._variants) > _MAX_VARIANTS:
                self._variants.pop(next(iter(self._variants)))
        return proc

    def plan_batch(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                   dtype: Any = "float32") -> PlannedBatch:
        """Reads the images' headers only and sizes the output: ``nbytes``, ``shape``, ``grid``
        are known before any pixel is decoded or any buffer allocated. ``decode()`` it next (or
        ``close()`` it to give up)."""
        dtype_name = parse_dtype(dtype)
        items = list(images) if isinstance(images, (list, tuple)) else [images]
        if not items:
            raise ValueError("no images given")
        cfg = self.config
        headers: list[ImageHeader] = []
        try:
            for i, it in enumerate(items):
                headers.append(open_image(i, it, hf=self.load_like_transformers,
                                          max_pixels=cfg.max_image_pixels,
                                          formats=cfg.image_formats,
                                          torchvision=self._torchvision))
            plans = [self.plan(h.width, h.height, h.index) for h in headers]
        except BaseException:
            for h in headers:
                h.close()
            raise
        return PlannedBatch(self, headers, plans, dtype_name)

    def prepare(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                dtype: Any = "float32", max_output_bytes: int | None = None) -> PreparedBatch:
        """Decodes and validates the images and sizes the output, without computing it.

        Lets a caller choose the destination (a shared-memory file, an RDMA slot) before the
        tensor is written exactly once: ``batch.write_into(buffer)``. With
        ``max_output_bytes``, an output larger than that raises OutputTooLargeError before
        anything is decoded.
        """
        planned = self.plan_batch(images, dtype)
        try:
            limit = _ADDRESSABLE if max_output_bytes is None else min(max_output_bytes,
                                                                       _ADDRESSABLE)
            planned.check_nbytes(limit)
            return planned.decode()
        finally:
            planned.close()

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        if return_tensors == "pt":
            import torch

            return ProcessorOutput(pixel_values=to_torch(pixel_values, dtype_name),
                                   image_grid_thw=torch.from_numpy(grid),
                                   num_tokens=torch.from_numpy(tokens))
        return ProcessorOutput(pixel_values=pixel_values, image_grid_thw=grid, num_tokens=tokens)


class _Sized:
    """Output geometry shared by a planned and a prepared batch."""

    def _size(self, proc: Processor, plans: list[Plan], dtype: str) -> None:
        self._proc = proc
        self.plans = plans
        self.dtype = dtype
        self.np_dtype = DTYPES[dtype][1]
        merge, temporal = proc._layout()
        p = proc.config.patch_size
        self.row_elems = 3 * temporal * p * p
        self.rows = [pl.grid_h * pl.grid_w for pl in plans]
        self.shape = proc._pixel_shape(sum(self.rows))
        self.nbytes = sum(self.rows) * self.row_elems * self.np_dtype.itemsize
        self.grid = np.array([[1, pl.grid_h, pl.grid_w] for pl in plans], dtype=np.int64)
        self.num_tokens = self.grid[:, 1] * self.grid[:, 2] // (proc.config.merge_size**2)

    def item_shape(self, index: int) -> tuple[int, ...]:
        """Shape of one image's slice of pixel_values."""
        return self._proc._pixel_shape(self.rows[index])


class PlannedBatch(_Sized):
    """Images whose headers were read and whose output is sized; nothing decoded yet.

    The sizes do not depend on an EXIF orientation the header did not show (a rotation by 90
    degrees swaps the grid's sides, never its cell count), so ``nbytes`` is exact.
    """

    def __init__(self, proc: Processor, headers: list[ImageHeader], plans: list[Plan],
                 dtype: str) -> None:
        self._headers = headers
        self.decode_seconds = 0.0  # see write_into
        self._size(proc, plans, dtype)

    def check_nbytes(self, limit: int) -> None:
        """Raises OutputTooLargeError (naming the first image that crosses the limit) when the
        output exceeds limit bytes."""
        if self.nbytes <= limit:
            return
        per_row = self.row_elems * self.np_dtype.itemsize
        total = 0
        for i, rows in enumerate(self.rows):
            total += rows * per_row
            if total > limit:
                raise OutputTooLargeError(i, self.nbytes, limit)

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
        """Whether write_into decodes while it computes (one JPEG the native decoder takes:
        its decode overlaps its own resize), rather than decoding first."""
        return (len(self._headers) == 1 and self._headers[0].decode_running is not None
                and decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG)

    def compute(self) -> np.ndarray:
        """Decodes and computes every image into a new pooled buffer (shaped like pixel_values),
        as write_into does."""
        try:
            self.check_nbytes(_ADDRESSABLE)
            flat = _native.pooled_empty(self.nbytes).view(self.np_dtype)
        except BaseException:
            self.close()
            raise
        return self.write_into(flat)

    def write_into(self, out: np.ndarray) -> np.ndarray:
        """Decodes and computes every image into ``out`` (PreparedBatch.write_into's rules),
        image i's native work overlapping the decodes of the images after it, or, for one JPEG,
        its own decode. Consumes the headers; the first failing image raises, as decode() does,
        and then what ``out`` holds is unspecified. Sets ``decode_seconds``: the decoding's
        share of the call (a JPEG's own decode CPU time where it overlapped its resize; the
        waits for decoded images otherwise)."""
        self.decode_seconds = 0.0
        try:
            flat = _destination(out, self, self.nbytes)
            pipe = self._proc.pipeline(self.dtype)
            if len(self._headers) == 1 and (running := self._headers[0].decode_running):
                # One JPEG: its decode overlaps its own resize (a batch overlaps images instead).
                pl = self.plans[0]
                took = np.zeros(1)
                done = running(lambda src, data: pipe.run(src, pl.resize_w, pl.resize_h,
                                                          pl.grid_h, pl.grid_w, flat, 0, fmt=_RGB,
                                                          jpeg=data, decode_seconds=took))
                self.decode_seconds = float(took[0])  # a failed decode's time counts too
                if done:
                    return flat[:self.nbytes // self.np_dtype.itemsize].reshape(self.shape)
            offset = 0
            with closing(decode_iter(self._headers)) as decoded:
                for i, px in enumerate(self._timed(decoded)):
                    pl = self._proc.plan(px.width, px.height, i)
                    if pl.grid_h * pl.grid_w != self.rows[i]:  # cannot happen (see decode())
                        raise RuntimeError("an image's output size changed in decoding")
                    pipe.run(px.array, pl.resize_w, pl.resize_h, pl.grid_h, pl.grid_w, flat,
                             offset, fmt=px.fmt)
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

    def __init__(self, proc: Processor, pixels: list[Pixels], plans: list[Plan],
                 dtype: str) -> None:
        self._pixels = pixels  # each read in its own format: converted while the core reads
        self._size(proc, plans, dtype)

    def compute(self) -> np.ndarray:
        """pixel_values in a new buffer from the native pools (pre-faulted when the same sizes
        came before), shaped like pixel_values."""
        return self.write_into(_native.pooled_empty(self.nbytes).view(self.np_dtype))

    def write_into(self, out: np.ndarray, index: int | None = None) -> np.ndarray:
        """Writes all images (or only image ``index``) into ``out``, a writable C-contiguous
        array of this batch's dtype with at least that many elements; returns the filled part
        shaped like pixel_values."""
        which = range(len(self.plans)) if index is None else [index]
        flat = _destination(out, self, sum(self.rows[i] for i in which) * self.row_elems
                            * self.np_dtype.itemsize)
        pipe = self._proc.pipeline(self.dtype)
        offset = 0
        for i in which:
            pl = self.plans[i]
            px = self._pixels[i]
            pipe.run(px.array, pl.resize_w, pl.resize_h, pl.grid_h, pl.grid_w, flat, offset,
                     fmt=px.fmt)
            offset += self.rows[i] * self.row_elems
        shape = self.shape if index is None else self.item_shape(index)
        return flat[:offset].reshape(shape)


def _destination(out: np.ndarray, batch: _Sized, nbytes: int) -> np.ndarray:
    """out flattened, once it is a writable C-contiguous array of batch's dtype holding
    nbytes."""
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("destination must be a writable C-contiguous array")
    flat = out.reshape(-1)
    if flat.dtype != batch.np_dtype:
        raise ValueError(f"destination dtype {flat.dtype} does not hold {batch.dtype}")
    if flat.nbytes < nbytes:
        raise ValueError(f"destination holds {flat.nbytes} bytes, the output needs {nbytes}")
    return flat


def check_aspect(index: int, width: int, height: int, limit: float = 200) -> None:
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    ratio = max(height, width) / min(height, width)
    if ratio > limit:
        raise InvalidImageError(index, f"absolute aspect ratio must be at most {limit:g}, "
                                       f"got {ratio:g} ({width}x{height})")


__all__ = ["Plan", "PlannedBatch", "PreparedBatch", "Processor", "ProcessorOutput", "check_aspect"]
