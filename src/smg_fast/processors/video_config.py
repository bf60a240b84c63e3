"""A video processor's settings: transformers' Qwen2-VL / Qwen3-VL video processor attributes.

``VideoConfig`` holds what changes a video's output (sampling, size budget, normalization,
patches). ``video_config`` builds one from a family name and a model folder's
``video_preprocessor_config.json`` (else its ``preprocessor_config.json``, as transformers'
``AutoVideoProcessor`` reads it), over the reference class's own defaults."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from .config import HALF, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from .folders import nested_fields, read_json

QWEN2, QWEN3 = "qwen2", "qwen3"  # the two sampling and resize rules
# The families whose video processor is transformers' Qwen2VLVideoProcessor or
# Qwen3VLVideoProcessor (as AutoVideoProcessor maps them).
RULE_OF_FAMILY = {"qwen2_vl": QWEN2, "qwen2_5_vl": QWEN2, "qwen3_vl": QWEN3}


@dataclass(frozen=True)
class VideoConfig:
    """Everything that changes a video processor's output."""

    rule: str  # QWEN2 or QWEN3
    patch_size: int
    temporal_patch_size: int
    merge_size: int
    min_pixels: int  # size["shortest_edge"]
    max_pixels: int  # size["longest_edge"]
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]
    rescale_factor: float = 1 / 255
    min_frames: int = 4
    max_frames: int = 768
    do_sample_frames: bool = False
    fps: float | None = None
    num_frames: int | None = None
    cap_pixels_per_frame: bool = False
    max_video_tokens: int = 128000


# The reference classes' attributes (what a config file lacks takes these).
CLASS_DEFAULTS = {
    QWEN2: VideoConfig(QWEN2, 14, 2, 2, 128 * 28 * 28, 28 * 28 * 768, OPENAI_CLIP_MEAN,
                       OPENAI_CLIP_STD),
    QWEN3: VideoConfig(QWEN3, 16, 2, 2, 128 * 32 * 32, 32 * 32 * 768, HALF, HALF,
                       do_sample_frames=True, fps=2, max_video_tokens=768),
}
_PLAIN = ("patch_size", "temporal_patch_size", "merge_size", "rescale_factor", "min_frames",
          "max_frames", "do_sample_frames", "fps", "num_frames", "cap_pixels_per_frame",
          "max_video_tokens")
_REQUIRED_TRUE = ("do_resize", "do_rescale", "do_normalize", "do_convert_rgb")


def read_video_fields(pre: dict[str, Any]) -> dict[str, Any]:
    """VideoConfig fields of a config file's keys (size or min/max_pixels, mean, std, ...).

    ValueError for settings smg-fast does not reproduce (do_resize=False, another filter)."""
    out: dict[str, Any] = {}
    size = pre.get("size") or {}
    if not isinstance(size, dict):
        raise ValueError(f"size must be a mapping, got {type(size).__name__}")
    for key, names in (("min_pixels", ("shortest_edge", "min_pixels")),
                       ("max_pixels", ("longest_edge", "max_pixels"))):
        for name in names:
            if size.get(name) is not None:
                out[key] = int(size[name])
                break
        if pre.get(key) is not None:
            out[key] = int(pre[key])
    for key in ("image_mean", "image_std"):
        if pre.get(key) is not None:
            out[key] = tuple(float(v) for v in pre[key])
    for key in _PLAIN:
        if pre.get(key) is not None:
            out[key] = pre[key]
    for key in _REQUIRED_TRUE:
        if pre.get(key) is False:
            raise ValueError(f"{key}=False is not supported for videos")
    if pre.get("do_center_crop"):
        raise ValueError("do_center_crop=True is not supported for videos")
    if pre.get("resample", 3) != 3:
        raise ValueError(f"videos are resized with resample=3 (BICUBIC) only, got "
                         f"{pre.get('resample')}")
    return out


def check_video_config(cfg: VideoConfig) -> None:
    """ValueError for impossible settings."""
    if cfg.rule not in CLASS_DEFAULTS:
        raise ValueError(f"unknown video rule {cfg.rule!r}")
    if not 0 < cfg.min_pixels <= cfg.max_pixels:
        raise ValueError("need 0 < size['shortest_edge'] <= size['longest_edge']")
    for name in ("patch_size", "temporal_patch_size", "merge_size", "max_video_tokens"):
        if int(getattr(cfg, name)) < 1:
            raise ValueError(f"{name} must be positive")
    if not 0 <= cfg.min_frames <= cfg.max_frames:
        raise ValueError("need 0 <= min_frames <= max_frames")
    if any(s == 0 for s in cfg.image_std):
        raise ValueError("image_std must be non-zero")


def build_video_config(family: str, fields: dict[str, Any]) -> VideoConfig:
    """The class defaults of family's video processor, then fields (which win), checked."""
    rule = RULE_OF_FAMILY.get(family)
    if rule is None:
        raise ValueError(f"family {family!r} has no video processor (video families: "
                         f"{sorted(RULE_OF_FAMILY)})")
    known = {f.name for f in dataclasses.fields(VideoConfig)}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"unknown video settings {sorted(unknown)}")
    cfg = dataclasses.replace(CLASS_DEFAULTS[rule], **fields)
    check_video_config(cfg)
    return cfg


def folder_video_fields(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """A model folder's video settings, found as transformers' AutoVideoProcessor finds them.

    processor_config.json's nested video_processor object, else video_preprocessor_config.json,
    else preprocessor_config.json; none of them: the class defaults."""
    folder = os.fspath(folder)
    nested = nested_fields(folder, "video_processor")
    if nested is not None:
        return read_video_fields(nested)
    for name in ("video_preprocessor_config.json", "preprocessor_config.json"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return read_video_fields(read_json(path))
    return {}


__all__ = ["CLASS_DEFAULTS", "QWEN2", "QWEN3", "RULE_OF_FAMILY", "VideoConfig",
           "build_video_config", "check_video_config", "folder_video_fields",
           "read_video_fields"]
