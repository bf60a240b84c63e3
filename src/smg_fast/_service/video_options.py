"""A VideoOptions message as the video processor's call options, as server and clients read it."""

from __future__ import annotations

import math
from typing import Any


def call_options(msg: Any) -> dict[str, Any]:
    """The video processor call options of a VideoOptions message (its set fields only).

    fps and num_frames each clear the other (the model's default fps must not meet a requested
    num_frames), and either turns frame sampling on unless do_sample_frames is set. ValueError
    for a value no sampling rule takes."""
    out: dict[str, Any] = {}
    has = msg.HasField
    if has("fps"):
        if not math.isfinite(msg.fps) or msg.fps <= 0:
            raise ValueError(f"video fps must be a positive number, got {msg.fps!r}")
        out["fps"] = float(msg.fps)
    if has("num_frames"):
        if msg.num_frames < 1:
            raise ValueError("video num_frames must be at least 1")
        out["num_frames"] = int(msg.num_frames)
    if has("fps") != has("num_frames"):
        out.setdefault("fps", None)
        out.setdefault("num_frames", None)
    if has("do_sample_frames"):
        out["do_sample_frames"] = bool(msg.do_sample_frames)
    elif has("fps") or has("num_frames"):
        out["do_sample_frames"] = True
    for key in ("min_frames", "max_frames", "min_pixels", "max_pixels"):
        if has(key):
            out[key] = int(getattr(msg, key))
    if has("decoder") and msg.decoder:  # the video processor checks the name
        out["decoder"] = msg.decoder
    return out


__all__ = ["call_options"]
