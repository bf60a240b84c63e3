"""The ``Processor`` every family subclasses: a call's images in, encoder inputs out.

It reads a call's inputs and options, allocates one output per call, and makes one native call
per image writing straight into its slice of the output. A family's subclass supplies its size
rule (``plan``) and its patch layout."""

from __future__ import annotations

import dataclasses
import threading
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from .. import _native
from .._dtypes import DTYPES, parse_dtype, to_torch
from ..compact import TABLE_DTYPES, CompactTensor, lut_array, parse_encoding
from ..errors import CompactFormatError, UnsupportedCallError
from ..imaging.media import ImageHeader, ImageInput, open_image
from ..resample import native_filter, native_pass_order
from . import torchvision as tv
from .batch import ADDRESSABLE, PlannedBatch, PreparedBatch
from .call_inputs import UNIT, CallImage, prepare_inputs
from .call_options import CallOptions, parse_options
from .config import ProcessorConfig, coerce_fields
from .plan import Plan
from .registry import check_config

LUT_HF = _native.LutRecipe.HF_RESCALE_NORMALIZE  # f32(f32(f64(u) * rescale) - mean) / std
_MAX_VARIANTS = 8  # processors for call-time options, kept per processor


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
    # where a patch's values go in its row: channel-first, or channel-last (Gemma 4's)
    patch_order: _native.PatchOrder = _native.PatchOrder.CHANNELS_FIRST
    backend_reason: str = ""  # why load_processor chose the backend (repr shows it)
    # Whether the float output is table[channel][u] of the uint8 output at the same position:
    # true of every output the native Pipeline writes (its kernels are checked against the table,
    # padding reads as pixel 0), so the compact format (encoding="uint8+lut") carries it exactly.
    # A family whose floats are computed otherwise sets False and keeps the float formats only.
    compact_exact: bool = True
    # Whether outputs may end in rows of literal zeros (Plan.pad_rows, Gemma 4's): the compact
    # format carries them exactly only where every channel's table maps pixel 0 to +0.0.
    zero_rows: bool = False
    # proc(videos=...): the video processor, or what makes it on the first video call (set by
    # load_processor for the video families; a folder's video settings are read only then).
    video_processor: Any = None
    video_factory: Any = None
    # Whether the plan's resizes read presize()'s image rather than the decoded one (Idefics3's
    # chained resizes); a JPEG's decode then does not overlap its resize.
    presizes: bool = False
    # the PIL resample code of the native resize where it is not the config's resample (Phi-4:
    # its tiles are resized BILINEAR, the config's BICUBIC is its global image's)
    resize_filter: int | None = None

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
        return p.thw

    def num_tokens(self, width: int, height: int) -> int:
        """LLM tokens for an image of this size (grid cells / merge_size^2 unless said)."""
        return int(self.tokens_for_grid(np.array([self.grid(width, height)], np.int64))[0])

    def presize(self, src: np.ndarray, fmt: Any) -> tuple[np.ndarray, Any]:
        """(image, pixel format) the plan's resizes read for a decoded image: itself here.

        A family whose reference resizes in steps (``presizes``) returns its last uint8 step."""
        return src, fmt

    def pad_batch(self, plans: list[Plan]) -> list[Plan]:
        """A batch's plans, with the zero rows the batch adds to each (Phi-4's): as planned here."""
        return plans

    def finish(self, pipe: _native.Pipeline, plan: Plan, flat: np.ndarray, offset: int) -> None:
        """Completes an image written into flat at element offset from its parts: nothing here.

        A family writes its plan's lead rows here (Phi-4's global image from its tiles)."""
        return None

    def canvas(self, plans: list[Plan]) -> tuple[int, int, int] | None:
        """The (3, H, W) canvas of a batch of plans, or None for patch rows (most families).

        With a canvas each image is output whole, channel-first, zero-padded to it (Pixtral)."""
        return None

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        """LLM tokens per image for (n, 3) grid rows [t, h, w]: h * w / merge_size^2."""
        return grid[:, 1] * grid[:, 2] // (self.config.merge_size**2)

    def pipeline(self, dtype: str) -> _native.Pipeline:
        """The native pipeline for one output dtype ("float32", "bfloat16", "float16"), cached.

        Filter, normalization table and patch layout are validated once. ``.lut`` is its 3 x 256
        normalization table."""
        pipe = self._pipelines.get(dtype)
        if pipe is None:
            cfg = self.config
            merge, temporal = self._layout()
            with self._lock:
                pipe = self._pipelines.get(dtype)
                if pipe is None:
                    recipe, mean, std = self.lut_recipe, cfg.image_mean, cfg.image_std
                    if not cfg.do_normalize:  # rescale only: torchvision's own multiply
                        recipe = tv.LUT_TORCH_RESCALE if self._torchvision else recipe
                        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
                    pipe = _native.Pipeline(
                        recipe=recipe, rescale=cfg.rescale_factor, mean=list(mean),
                        std=list(std), dtype=DTYPES[dtype][0],
                        filter=native_filter(cfg.resample if self.resize_filter is None
                                             else self.resize_filter),
                        pass_order=native_pass_order(cfg.pass_order), patch=cfg.patch_size,
                        merge=merge, temporal=temporal, resampler=self._resampler,
                        patch_order=self.patch_order)
                    self._pipelines[dtype] = pipe
        return pipe

    def __call__(
        self,
        images: ImageInput | list[ImageInput] | tuple[ImageInput, ...] | None = None,
        return_tensors: str | None = "np",
        dtype: Any = "float32",
        *,
        channels_first_wins: bool = False,
        videos: Any = None,
        videos_kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> ProcessorOutput:
        """Preprocesses one image or a list of images into the family's encoder inputs.

        Nested lists are flattened as transformers does; PIL images, numpy arrays and torch tensors
        HWC or CHW, uint8 or float, bytes, paths, ``data:`` URLs and base64 strings are read.

        Returns ``pixel_values`` (all images' patches concatenated in order), ``image_grid_thw``
        (int64, one [t, h, w] row per image) and ``num_tokens`` (int64 per image). For
        ``dtype="bfloat16"`` with numpy output the array is uint16 holding bfloat16 bits.
        ``options``: transformers' call-time options (``size``, ``min_pixels``, ``max_pixels``,
        ``do_rescale``, ``do_normalize``, ``image_mean``, ``image_std``, ``patch_size``,
        ``merge_size``, ``temporal_patch_size``, ``do_convert_rgb``, ``input_data_format``, ...);
        one smg-fast cannot honour raises an error naming it. An array whose first and last axes
        could both be channels is read as HWC unless ``channels_first_wins`` (transformers'
        guess, which ``smg_fast.hf`` uses) or ``input_data_format`` says otherwise.
        ``encoding="uint8+lut"``: ``pixel_values`` is a :class:`~smg_fast.compact.CompactTensor`
        (the resized uint8 patches and the dtype's 3 x 256 table), which ``smg_fast.expand``
        turns into exactly the dtype's output; CompactFormatError where that is not exact.

        ``videos`` (encoded bytes, paths or frames; see ``VideoProcessor``) with their options in
        ``videos_kwargs`` add ``pixel_values_videos``, ``video_grid_thw`` and
        ``num_video_tokens``; images may then be left out."""
        if videos is not None:
            if options.get("encoding"):
                raise UnsupportedCallError("encoding='uint8+lut' is for images: call videos "
                                           "without it")
            return self._with_videos(images, videos, videos_kwargs or {}, return_tensors, dtype,
                                     channels_first_wins, options)
        if images is None:
            raise ValueError("no images given")
        table_dtype, dtype = self._compact_dtype(options, dtype)
        return_tensors, opts, items = self._read_call(images, return_tensors, channels_first_wins,
                                                      options)
        if table_dtype:  # refused before anything is computed, as the call's options normalize
            for scale in dict.fromkeys(it.scale for it in items):
                self._variant(opts, scale).compact_table(table_dtype)
        parts, grids, tokens, procs = [], [], [], []
        start = 0
        while start < len(items):  # runs of images with the same effective config
            proc = self._variant(opts, items[start].scale)
            procs.append(proc)
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
        pixel_values = parts[0] if len(parts) == 1 else self._join(parts)
        if table_dtype:
            pixel_values = self._compact(procs, pixel_values, table_dtype, return_tensors)
        return self._wrap(pixel_values, np.concatenate(grids), np.concatenate(tokens),
                          return_tensors, dtype_name)

    def _join(self, parts: list[np.ndarray]) -> np.ndarray:
        """The outputs of a call's runs of images (float images next to uint8 ones) as one."""
        return np.concatenate(parts)

    def channel_run(self) -> int:
        """Elements per channel run in pixel_values (1 where a patch's channels interleave)."""
        if self.patch_order == _native.PatchOrder.CHANNELS_LAST:
            return 1
        return self._layout()[1] * self.config.patch_size ** 2

    def compact_table(self, dtype: str) -> np.ndarray:
        """The 3 x 256 table of dtype that expands this processor's uint8 output exactly.

        CompactFormatError where no table does: a family whose floats are computed otherwise,
        or zero padding rows while some channel's table maps pixel 0 to anything but +0.0."""
        if not self.compact_exact:
            raise CompactFormatError(f"model family {self.config.family!r} computes floats that "
                                     "are not a table of its uint8 pixels: request a float "
                                     "dtype without encoding")
        lut = lut_array(self.pipeline(dtype).lut, dtype)
        if self.zero_rows and np.ascontiguousarray(np.asarray(lut)[:, 0]).view(np.uint8).any():
            raise CompactFormatError(f"model family {self.config.family!r} pads with zero rows "
                                     "and this call's normalization maps pixel 0 to a nonzero "
                                     "value, so no table carries the padding: request a float "
                                     "dtype without encoding")
        return lut

    def _compact_dtype(self, options: dict[str, Any], dtype: Any) -> tuple[str, Any]:
        """(table dtype, dtype to compute) for a call's ``encoding`` option (removed).

        ("", dtype) without it; with it the output is computed as uint8."""
        if not parse_encoding(options.pop("encoding", None)):
            return "", dtype
        name = parse_dtype(dtype)
        if name not in TABLE_DTYPES:
            raise ValueError(f"encoding='uint8+lut' carries {', '.join(TABLE_DTYPES)}, "
                             f"not {name}")
        return name, "uint8"

    def _compact(self, procs: list[Processor], codes: np.ndarray, table_dtype: str,
                 return_tensors: str | None) -> CompactTensor:
        """The uint8 output with the table of table_dtype the processors in procs share."""
        luts = [p.compact_table(table_dtype) for p in procs]
        if any(not np.array_equal(luts[0], t) for t in luts[1:]):
            raise CompactFormatError("the call's images normalize with different tables (float "
                                     "images in [0, 1] next to pixel levels): send them in "
                                     "separate calls")
        lut = luts[0]
        run = procs[0].channel_run()
        if return_tensors == "pt":
            return CompactTensor(to_torch(codes, "uint8"), to_torch(np.array(lut), table_dtype),
                                 table_dtype, run)
        return CompactTensor(codes, lut, table_dtype, run)

    def _with_videos(self, images: Any, videos: Any, video_options: dict[str, Any],
                     return_tensors: Any, dtype: Any, channels_first_wins: bool,
                     options: dict[str, Any]) -> ProcessorOutput:
        """The images' outputs (if any) and the videos'."""
        if self.video_processor is None and self.video_factory is not None:
            self.video_processor = self.video_factory()
        if self.video_processor is None:
            raise UnsupportedCallError(f"{type(self).__name__} for {self.config.family} has no "
                                       "video processor (load_processor gives the video "
                                       "families one)")
        out = ProcessorOutput() if images is None else self(
            images, return_tensors, dtype, channels_first_wins=channels_first_wins, **options)
        out.update(self.video_processor(videos, return_tensors=getattr(
            return_tensors, "value", return_tensors), dtype=dtype, **video_options))
        return out

    def _read_call(self, images: Any, return_tensors: Any, channels_first_wins: bool,
                   options: dict[str, Any]) -> tuple[str | None, CallOptions, list[CallImage]]:
        """A call's return_tensors ("np", "pt" or None), options and images, checked."""
        return_tensors = getattr(return_tensors, "value", return_tensors)
        if return_tensors not in (None, "np", "pt"):
            raise ValueError(f"return_tensors must be 'np' or 'pt', got {return_tensors!r}")
        opts = parse_options(self.config, options)
        items = prepare_inputs(images, opts, self._torchvision, channels_first_wins)
        if not items:
            raise ValueError("no images given")
        return return_tensors, opts, items

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
            check_config(cfg)
        except (TypeError, ValueError) as exc:
            raise UnsupportedCallError(str(exc)) from None
        proc = type(self)(cfg)
        with self._lock:
            self._variants[key] = proc
            while len(self._variants) > _MAX_VARIANTS:
                self._variants.pop(next(iter(self._variants)))
        return proc

    def plan_batch(self, images: ImageInput | list[ImageInput] | tuple[ImageInput, ...],
                   dtype: Any = "float32") -> PlannedBatch:
        """Reads the images' headers only and sizes the output.

        ``nbytes``, ``shape``, ``grid`` are known before any pixel is decoded or any buffer
        allocated. ``decode()`` it next (or ``close()`` it to give up)."""
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
            limit = ADDRESSABLE if max_output_bytes is None else min(max_output_bytes,
                                                                       ADDRESSABLE)
            planned.check_nbytes(limit)
            return planned.decode()
        finally:
            planned.close()

    def _wrap(self, pixel_values: np.ndarray, grid: np.ndarray, tokens: np.ndarray,
              return_tensors: str | None, dtype_name: str) -> ProcessorOutput:
        if return_tensors == "pt":
            import torch

            if not isinstance(pixel_values, CompactTensor):
                pixel_values = to_torch(pixel_values, dtype_name)
            return ProcessorOutput(pixel_values=pixel_values,
                                   image_grid_thw=torch.from_numpy(grid),
                                   num_tokens=torch.from_numpy(tokens))
        return ProcessorOutput(pixel_values=pixel_values, image_grid_thw=grid, num_tokens=tokens)


__all__ = ["LUT_HF", "Processor", "ProcessorOutput"]
