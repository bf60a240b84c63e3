"""Video items: their options off the wire, their plan, their metadata on the wire.

A MediaItem with ``video`` set is planned by the model's video processor from its container
header alone (frames sampled, output sized, its frames not decoded: the torchcodec and opencv
decoders only read the display rotation off a first frame decoded apart), admitted on that size
like an image, then decoded and written once into its destination. The pixel cache keys it by
its content hash, its decoder and the video config its options make (all change the output)."""

from __future__ import annotations

from typing import Any

import grpc

from .._service.video_options import call_options
from ..errors import InvalidVideoError, UnsupportedCallError
from ..processors.video import PlannedVideo, VideoProcessor
from .request_error import RequestError

_INVALID = grpc.StatusCode.INVALID_ARGUMENT


def _bad(index: int, problem: str) -> RequestError:
    return RequestError(_INVALID, f"item {index}: {problem}")


def video_options(index: int, msg: Any) -> dict[str, Any]:
    """The video processor call options of an item's VideoOptions; RequestError if invalid."""
    try:
        return call_options(msg)
    except ValueError as exc:
        raise _bad(index, str(exc)) from None


def _check_pixels(index: int, vp: VideoProcessor, options: dict[str, Any]) -> None:
    """A request may narrow the model's video pixel range, never widen it."""
    cfg = vp.config
    lo = options.get("min_pixels", cfg.min_pixels)
    hi = options.get("max_pixels", cfg.max_pixels)
    if not cfg.min_pixels <= lo <= hi <= cfg.max_pixels:
        raise _bad(index, f"video min_pixels={lo}, max_pixels={hi}: need {cfg.min_pixels} <= "
                          f"min_pixels <= max_pixels <= {cfg.max_pixels}")


def timestamps(indices: list[int], fps: float | None, temporal: int) -> list[float]:
    """Seconds per temporal group, as transformers' Qwen3VLProcessor puts them in the prompt.

    The indices padded with the last to a multiple of ``temporal``, each over fps (24 when
    unknown), the first and last of each group averaged."""
    rate = 24 if not fps else fps
    padded = list(indices)
    if padded and len(padded) % temporal:
        padded += [padded[-1]] * (temporal - len(padded) % temporal)
    seconds = [i / rate for i in padded]
    return [(seconds[k] + seconds[k + temporal - 1]) / 2
            for k in range(0, len(seconds), temporal)]


def plan_video(vp: VideoProcessor, index: int, data: bytes, options: dict[str, Any],
               dtype: str, check: Any) -> PlannedVideo:
    """The item's plan (header read, frames sampled, output sized); RequestError if refused.

    Its metadata gains ``timestamps`` (see ``timestamps``)."""
    _check_pixels(index, vp, options)
    try:
        planned = vp.plan(data, dtype, index=index, check=check, **options)
    except InvalidVideoError as exc:
        raise _bad(index, exc.problem) from None
    except (UnsupportedCallError, ValueError) as exc:  # options the sampling rule refuses
        raise _bad(index, str(exc)) from None
    except ImportError:
        raise RequestError(grpc.StatusCode.FAILED_PRECONDITION,
                           "this server cannot decode videos: PyAV is not installed (pip "
                           "install 'smg-fast[video]')") from None
    meta = planned.metadata
    meta["timestamps"] = timestamps(meta["frames_indices"], meta.get("fps"),
                                    vp.config.temporal_patch_size)
    return planned


def video_planner(vp: VideoProcessor, index: int, data: bytes, options: dict[str, Any],
                  dtype: str, check: Any) -> Any:
    """() -> a fresh plan of the item (its header read again), decoding bounded by check."""
    return lambda: plan_video(vp, index, data, options, dtype, check)


def video_fingerprint(planned: PlannedVideo) -> str:
    """What, besides the content and the dtype, keys a video's cached output."""
    return f"video:{planned.decoder}:{planned.config!r}"


def set_video_info(msg: Any, metadata: dict[str, Any]) -> None:
    """Fills a VideoInfo message from a video's metadata."""
    msg.frames_indices.extend(int(i) for i in metadata.get("frames_indices") or ())
    msg.fps = float(metadata.get("fps") or 0.0)
    msg.total_num_frames = int(metadata.get("total_num_frames") or 0)
    msg.duration = float(metadata.get("duration") or 0.0)
    msg.width = int(metadata.get("width") or 0)
    msg.height = int(metadata.get("height") or 0)
    msg.timestamps.extend(float(t) for t in metadata.get("timestamps") or ())
    msg.decoder = str(metadata.get("video_backend") or "")


__all__ = ["plan_video", "set_video_info", "timestamps", "video_fingerprint", "video_options",
           "video_planner"]
