"""``VideoProcessor``: videos in, ``pixel_values_videos`` and ``video_grid_thw`` out.

Bit-identical to transformers' ``Qwen2VLVideoProcessor`` (Qwen2-VL, Qwen2.5-VL) and
``Qwen3VLVideoProcessor`` (Qwen3-VL) on the same frames: their frame sampling, their video
smart_resize, torch's uint8 antialiased bicubic resize, the fused rescale + normalize and the
temporal patch layout (frames in groups of ``temporal_patch_size``, the last frame repeated to
fill the last group). Each frame goes through the torchvision image pipeline once (the native
resize + normalize + patchify, temporal size 1), and its patches are written into their slot of
the video's output. Encoded videos are decoded by PyAV (``smg_fast.video``) with the RGB
conversion of the chosen reference decoder (``decoder``: pyav, torchcodec, opencv): only the
sampled frames are converted to RGB, and decoding stops after the last one."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _native
from ..errors import InvalidVideoError, UnsupportedCallError, VideoTooLargeError
from ..video.container import VideoLimits, open_video, set_threads
from ..video.convert import check_decoder
from ..video.decode import check_indices, iter_frames
from ..video.decode_memory import video_decode_bytes
from ..video.stream_scan import decoder_metadata
from .video_config import VideoConfig
from .video_inputs import FrameVideo, video_items
from .video_plan import VideoPlan, plan_video, sample_indices

# The default max_output_bytes of a call: 4 GiB of pixel_values_videos. At float32 that is about
# 228k LLM tokens of Qwen2/2.5-VL video (4704 bytes a patch, 4 patches a token) and 175k of
# Qwen3-VL's (6144 bytes a patch), more than Qwen2-VL's (32k) and Qwen2.5-VL's (128k) context
# windows hold, and most of Qwen3-VL's (256k): a larger tensor is a mistake or a video bomb (a
# Qwen2-VL call without sampling keeps every frame: an hour at 30 fps is over 700 GB).
MAX_OUTPUT_BYTES = 4 << 30

_CALL_OPTIONS = frozenset({"fps", "num_frames", "do_sample_frames", "video_metadata",
                           "return_metadata", "cap_pixels_per_frame", "size", "min_pixels",
                           "max_pixels", "min_frames", "max_frames", "decoder"})


class VideoProcessor:
    """Turns videos into Qwen-family video encoder inputs, bit-identical to transformers'."""

    def __init__(self, config: VideoConfig, image_processor: Any,
                 limits: VideoLimits | None = None, threads: int | None = None,
                 decoder: str = "pyav", skip: bool = True) -> None:
        self.config = config
        self.limits = limits or VideoLimits()
        self.threads = threads  # FFmpeg decoder threads per video (None: PyAV's defaults)
        # Encoded videos: the skip decode (non-reference frames not sampled are not decoded), or
        # every frame up to the last sampled one, as transformers' loader (docs/video.md)
        if not isinstance(skip, bool):
            raise TypeError(f"skip must be True or False, got {skip!r}")
        self.skip = skip
        self.decoder = check_decoder(decoder)  # whose frames and metadata encoded videos get
        self._image = image_processor  # a torchvision-backend processor, temporal size 1

    def __repr__(self) -> str:
        return f"VideoProcessor({self.config})"

    def tokens_for_grid(self, grid: np.ndarray) -> np.ndarray:
        """LLM tokens per video for (n, 3) rows [t, h, w]: t * h * w / merge_size^2."""
        return grid[:, 0] * grid[:, 1] * grid[:, 2] // (self.config.merge_size ** 2)

    def _options(self, options: dict[str, Any]) -> tuple[VideoConfig, dict[str, Any]]:
        """A call's config (its overrides applied) and its other options."""
        unknown = set(options) - _CALL_OPTIONS
        if unknown:
            raise UnsupportedCallError(f"video options {sorted(unknown)} are not supported")
        cfg, rest = self.config, dict(options)
        fields: dict[str, Any] = {}
        size = rest.pop("size", None)
        if size is not None:
            fields["min_pixels"] = int(size.get("shortest_edge", cfg.min_pixels))
            fields["max_pixels"] = int(size.get("longest_edge", cfg.max_pixels))
        for key in ("min_pixels", "max_pixels", "min_frames", "max_frames",
                    "cap_pixels_per_frame"):
            if rest.get(key) is not None:  # None: the processor's own value, as there
                fields[key] = rest.pop(key)
            rest.pop(key, None)
        for key in ("fps", "num_frames"):  # an explicit None clears the processor's value
            if key in rest:
                fields[key] = rest.pop(key)
        if "do_sample_frames" in rest:
            fields["do_sample_frames"] = bool(rest.pop("do_sample_frames"))
        if fields:
            import dataclasses

            from .video_config import check_video_config

            cfg = dataclasses.replace(cfg, **fields)
            check_video_config(cfg)
        return cfg, rest

    def __call__(self, videos: Any, return_tensors: str | None = "np", dtype: Any = "float32",
                 max_output_bytes: int | None = None, **options: Any) -> dict[str, Any]:
        """Processes one video or a list of videos into the family's video encoder inputs.

        Returns ``pixel_values_videos`` (all videos' patches in order), ``video_grid_thw``
        (int64, one [t, h, w] row per video), ``num_video_tokens`` and, with
        ``return_metadata=True``, ``video_metadata`` (per video: frames_indices, fps,
        total_num_frames, duration, ...).

        Options as transformers' video processors take them: ``fps``, ``num_frames``,
        ``do_sample_frames``, ``video_metadata``, ``size``, ``min_frames``, ``max_frames``,
        ``cap_pixels_per_frame``; ``decoder`` (``pyav``, ``torchcodec``, ``opencv``; default
        the processor's) picks whose RGB conversion and metadata an encoded video gets.
        ``max_output_bytes`` (default ``MAX_OUTPUT_BYTES``, 4 GiB):
        every video's header is read and its output planned first, and a call whose output
        would be larger raises VideoTooLargeError (an OutputTooLargeError and an
        InvalidVideoError) before any frame is decoded."""
        from .._dtypes import DTYPES, parse_dtype

        limit = _output_limit(max_output_bytes)
        cfg, rest = self._options(options)
        return_metadata = bool(rest.pop("return_metadata", False))
        decoder = check_decoder(rest.pop("decoder", None) or self.decoder)
        items = video_items(videos, rest.pop("video_metadata", None))
        dtype_name = parse_dtype(dtype)
        np_dtype = np.dtype(DTYPES[dtype_name][1])
        sources: list[_Source] = []
        try:
            planned = []
            for i, item in enumerate(items):
                sources.append(_open_item(i, item, self.limits, decoder, self.threads,
                                          self.skip))
                planned.append(_plan(i, cfg, sources[-1], self.limits.max_frames))
            _check_output(planned, np_dtype.itemsize, limit)
            out = output_array(sum(plan.elems for _, plan in planned), np_dtype)  # written once
            at = 0
            for i, (src, (indices, plan)) in enumerate(zip(sources, planned, strict=True)):
                self._fill(i, src, indices, plan, out[at:at + plan.elems], dtype_name)
                at += plan.elems
        finally:
            for src in sources:
                src.close()
        grid = np.array([(pl.grid_t, pl.grid_h, pl.grid_w) for _, pl in planned],
                        np.int64).reshape(-1, 3)
        pixels = out.reshape(-1, planned[0][1].row_elems)
        result: dict[str, Any] = {"pixel_values_videos": pixels, "video_grid_thw": grid,
                                  "num_video_tokens": self.tokens_for_grid(grid)}
        if return_metadata:
            result["video_metadata"] = [src.metadata for src in sources]
        if return_tensors == "pt":
            import torch

            from .._dtypes import to_torch

            result["pixel_values_videos"] = to_torch(pixels, dtype_name)
            result["video_grid_thw"] = torch.from_numpy(grid)
        return result

    def plan(self, video: Any, dtype: Any = "float32", index: int = 0,
             check: Callable[[], None] | None = None, **options: Any) -> PlannedVideo:
        """Reads one encoded video's header and plans its output; no frame is decoded.

        ``video``: encoded bytes or a local file path; ``options`` as ``__call__`` takes them
        (``fps``, ``num_frames``, ``size``, ...; not ``video_metadata`` or ``return_metadata``:
        the plan's ``metadata`` is always there). ``index`` names the video in errors;
        ``check()`` runs between decoded frames and may raise to stop the decoding. Raises
        InvalidVideoError (header, sampling, size) before anything is allocated. ``close()``
        the plan unless it is written."""
        from .._dtypes import parse_dtype

        cfg, rest = self._options(options)
        decoder = check_decoder(rest.pop("decoder", None) or self.decoder)
        if rest:
            raise UnsupportedCallError(f"plan() takes no {sorted(rest)}")
        if not isinstance(video, (bytes, bytearray, memoryview, str, os.PathLike)):
            raise TypeError(f"video {index}: plan() takes encoded bytes or a file path, got "
                            f"{type(video).__name__}")
        dtype_name = parse_dtype(dtype)
        source = _Encoded(index, video, self.limits, decoder, self.threads, self.skip)
        try:
            indices, plan = _plan(index, cfg, source, self.limits.max_frames)
        except BaseException:
            source.close()
            raise
        return PlannedVideo(self, index, source, indices, plan, dtype_name, cfg, check, decoder)

    def _fill(self, index: int, source: _Source, indices: np.ndarray | None, plan: VideoPlan,
              out: np.ndarray, dtype: str, check: Callable[[], None] | None = None) -> float:
        """Writes each sampled frame's patches into its temporal slot of out.

        ``check()`` runs before each frame is decoded (and each packet, inside the decoder's
        loop) and before each frame is processed. Returns the seconds spent decoding."""
        cfg = self.config
        p, t = cfg.patch_size, cfg.temporal_patch_size
        rows = plan.grid_h * plan.grid_w
        flat = out.reshape(-1)
        slots = flat.reshape(plan.grid_t, rows, 3, t, p * p)
        group = rows * 3 * t * p * p  # elements of one temporal group's patch rows
        pipe = self._image.pipeline(dtype)
        k = 0
        decoding = 0.0
        frames = source.frames(indices, self.threads, check)
        while True:
            t0 = time.perf_counter()
            rgb = next(frames, None)
            decoding += time.perf_counter() - t0
            if rgb is None:
                break
            if check is not None:
                check()
            # Straight into the frame's places in its temporal group's patch rows.
            pipe.run(rgb, plan.resize_w, plan.resize_h, plan.grid_h, plan.grid_w, flat,
                     (k // t) * group, slot=k % t, slots=t)
            k += 1
        if k != plan.frames:
            raise InvalidVideoError(index, f"the stream gave {k} of the {plan.frames} sampled "
                                           "frames (truncated or corrupt)")
        while k % t:  # the last frame repeated to fill the last temporal group
            slots[k // t, :, :, k % t, :] = slots[k // t, :, :, k % t - 1, :]
            k += 1
        return decoding


class PlannedVideo:
    """One video whose header was read and whose output is planned; nothing decoded yet.

    ``nbytes``, ``shape``, ``grid`` and ``num_tokens`` are exact before any frame is decoded
    (what a server admits a video on). ``write_into`` (or ``compute``) decodes the sampled frames
    and writes pixel_values_videos once; ``close`` releases the container without decoding."""

    decodes_while_computing = True  # frames are decoded as they are written

    def __init__(self, proc: VideoProcessor, index: int, source: _Source,
                 indices: np.ndarray | None, plan: VideoPlan, dtype: str, config: VideoConfig,
                 check: Callable[[], None] | None, decoder: str = "pyav") -> None:
        from .._dtypes import DTYPES

        self._proc = proc
        self.index = index
        self._source = source
        self._indices = indices
        self.plan = plan
        self.dtype = dtype
        self.np_dtype = np.dtype(DTYPES[dtype][1])
        self.config = config  # the call's (its options applied): what keys a cached output
        self.decoder = decoder  # whose frames: with config, what keys a cached output
        self.metadata = source.metadata  # transformers' video_metadata fields, frames_indices
        self.check = check
        self.decode_seconds = 0.0
        self.shape = (plan.grid_t * plan.grid_h * plan.grid_w, plan.row_elems)
        self.nbytes = plan.elems * self.np_dtype.itemsize
        self.grid = np.array([[plan.grid_t, plan.grid_h, plan.grid_w]], np.int64)
        self.num_tokens = proc.tokens_for_grid(self.grid)
        # What decoding holds at its peak, from the header: what a server's decode budget takes.
        self.decode_bytes = source.decode_bytes(indices, proc.threads)
        self._closed = False

    def write_into(self, out: np.ndarray) -> np.ndarray:
        """Decodes and writes the video into ``out`` (a writable C-contiguous array of the dtype).

        Returns the part written, shaped like pixel_values_videos; consumes the plan (a second
        write raises RuntimeError: plan the video again)."""
        if self._closed:
            raise RuntimeError("this video plan was written or closed: plan the video again")
        try:
            if not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("destination must be a writable C-contiguous array")
            flat = out.reshape(-1)
            if flat.dtype != self.np_dtype:
                raise ValueError(f"destination dtype {flat.dtype} does not hold {self.dtype}")
            if flat.size < self.plan.elems:
                raise ValueError(f"destination holds {flat.nbytes} bytes, the output needs "
                                 f"{self.nbytes}")
            part = flat[:self.plan.elems]
            self.decode_seconds = self._proc._fill(self.index, self._source, self._indices,
                                                   self.plan, part, self.dtype, self.check)
            return part.reshape(self.shape)
        finally:
            self.close()

    def compute(self) -> np.ndarray:
        """Decodes and computes the video into a new buffer."""
        try:
            out = output_array(self.plan.elems, self.np_dtype)
        except BaseException:
            self.close()
            raise
        return self.write_into(out)

    def close(self) -> None:
        """Releases the container (idempotent)."""
        self._closed = True
        self._source.close()


class _Source:
    """One video's metadata and its sampled frames, in order (duplicates repeated)."""

    def __init__(self, metadata: dict[str, Any], frame_count: int, size: tuple[int, int]) -> None:
        self.metadata = metadata
        self.frame_count = frame_count  # the frames indices may name (the header's for bytes)
        self.size = size  # (height, width) of its frames, what the resize plan reads

    def frames(self, indices: np.ndarray | None, threads: int | None,
               check: Callable[[], None] | None = None) -> Any:
        raise NotImplementedError

    def decode_bytes(self, indices: np.ndarray | None, threads: int | None) -> int:
        """Memory decoding the sampled frames holds at its peak (frames in memory: none)."""
        return 0

    def close(self) -> None:
        """Releases what the source holds."""


class _Frames(_Source):
    def __init__(self, video: FrameVideo) -> None:
        t, h, w, _ = video.frames.shape
        meta: dict[str, Any] = {"total_num_frames": t, "fps": None, "duration": None,
                                "frames_indices": list(range(t)), "height": h, "width": w}
        if video.metadata is not None:  # as given (an engine may leave height None); indices
            meta["frames_indices"] = None  # not given are None, as transformers' VideoMetadata
            meta.update(video.metadata)
        super().__init__(meta, t, (h, w))
        self._frames = video.frames

    def frames(self, indices: np.ndarray | None, threads: int | None,
               check: Callable[[], None] | None = None) -> Any:
        order = range(len(self._frames)) if indices is None else indices
        for i in order:
            if check is not None:
                check()
            yield np.ascontiguousarray(self._frames[i])


class _Encoded(_Source):
    def __init__(self, index: int, data: Any, limits: VideoLimits,
                 decoder: str = "pyav", threads: int | None = None, skip: bool = True) -> None:
        self._header = open_video(index, data, limits)
        self._decoder = decoder
        self._skip = skip
        try:
            set_threads(self._header, threads)  # a bad count is refused at planning
            meta = decoder_metadata(self._header, decoder)
        except BaseException:
            self._header.close()
            raise
        # Indices are checked against the smaller of the two counts: the frames the sampling
        # metadata declares and the frames the header declares (what decoding checks).
        count = min(int(meta["total_num_frames"]), self._header.total_frames)
        super().__init__(meta, count, (meta["height"], meta["width"]))

    def frames(self, indices: np.ndarray | None, threads: int | None,
               check: Callable[[], None] | None = None) -> Any:
        if indices is None:  # every frame the sampling metadata counts (what was planned)
            indices = np.arange(self.frame_count)
        wanted = [int(i) for i in indices]
        if wanted != sorted(set(wanted)):  # repeated indices: decode once, hand out in order
            got = dict(iter_frames(self._header, sorted(set(wanted)), threads, self._skip,
                                   check=check, decoder=self._decoder))
            for i in wanted:
                yield got[i]  # iter_frames gives every wanted frame or raises
            return
        for _, rgb in iter_frames(self._header, wanted, threads, self._skip, check=check,
                                  decoder=self._decoder):
            yield rgb

    def decode_bytes(self, indices: np.ndarray | None, threads: int | None) -> int:
        h = self._header
        if indices is None:
            sampled, repeats = h.total_frames, False
        else:
            sampled = len(set(indices.tolist()))
            repeats = sampled != len(indices) or bool(np.any(np.diff(indices) < 0))
        return video_decode_bytes(h.pixel_format, h.width, h.height, sampled, repeats, threads)

    def close(self) -> None:
        self._header.close()


def output_array(elems: int, dtype: np.dtype) -> np.ndarray:
    """A new 1-D output of elems, from the calling thread's scratch pool where it fits there.

    The memory of an output the caller has dropped serves the next one instead of new pages the
    kernel must zero (a 4K clip's output is 135 MB); one over the pool's per-thread cap is a
    plain array (huge pages where NumPy advises them)."""
    nbytes = elems * dtype.itemsize
    if nbytes <= _native.scratch_stats()["cap_bytes"]:
        return _native.pooled_empty(nbytes, huge_pages=False).view(dtype)
    return np.empty(elems, dtype)


def _output_limit(max_output_bytes: int | None) -> int:
    """The call's byte limit: MAX_OUTPUT_BYTES unless given; ValueError if negative."""
    if max_output_bytes is None:
        return MAX_OUTPUT_BYTES
    if int(max_output_bytes) < 0:
        raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes}")
    return int(max_output_bytes)


def _plan(index: int, cfg: VideoConfig, source: _Source,
          max_frames: int = VideoLimits.max_frames) -> tuple[np.ndarray | None, VideoPlan]:
    """The frames a video keeps (None: all) and its output plan; its metadata gets the indices.

    A num_frames over max_frames (the declared-frames limit) is refused before the sampling
    rule lists that many indices (Qwen3-VL's repeats frames up to any count)."""
    meta = source.metadata
    if cfg.do_sample_frames and cfg.num_frames is not None and cfg.num_frames > max_frames:
        raise InvalidVideoError(index, f"num_frames={cfg.num_frames} is over the limit of "
                                       f"{max_frames} frames")
    indices = sample_indices(cfg, meta) if cfg.do_sample_frames else None
    if indices is not None:  # Qwen2-VL's float step rounds past the end for some counts
        check_indices(index, indices, source.frame_count, hint=(
            ": the sampling rule chose it, as transformers' does, whose frame indexing raises "
            "IndexError there; ask for another num_frames or fps"))
    if indices is not None:
        meta["frames_indices"] = [int(x) for x in indices]
    elif "frames_indices" not in meta:  # a caller's metadata stays as given, as in transformers
        meta["frames_indices"] = list(range(source.frame_count))
    count = len(indices) if indices is not None else source.frame_count
    return indices, plan_video(index, cfg, count, *source.size)


def _check_output(planned: list[tuple[Any, VideoPlan]], itemsize: int, limit: int) -> None:
    """VideoTooLargeError naming the first video at which the planned total crosses limit."""
    sizes = [plan.elems * itemsize for _, plan in planned]
    total, running = sum(sizes), 0
    for i, size in enumerate(sizes):
        running += size
        if running > limit:
            raise VideoTooLargeError(i, total, limit, hint=(
                f" ({len(sizes)} video(s)); pass max_output_bytes= to raise it, or sample fewer "
                "frames or pixels (fps, num_frames, max_pixels)"))


def _open_item(index: int, item: Any, limits: VideoLimits, decoder: str = "pyav",
               threads: int | None = None, skip: bool = True) -> _Source:
    if isinstance(item, FrameVideo):
        return _Frames(item)
    return _Encoded(index, item, limits, decoder, threads, skip)


__all__ = ["MAX_OUTPUT_BYTES", "PlannedVideo", "VideoProcessor"]
