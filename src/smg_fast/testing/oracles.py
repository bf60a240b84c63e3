"""transformers' Qwen image processors configured like the published hub configs: the oracles
the tests and the benchmarks compare against. The configs are written out here independently
of smg_fast's own tables, so a wrong built-in value cannot agree with itself."""

from __future__ import annotations

from typing import Any

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Qwen2-VL-7B / Qwen2.5-VL-7B / Qwen3-VL-8B preprocessor configs.
HUB_QWEN = {
    "qwen2_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14, mean=CLIP_MEAN,
                     std=CLIP_STD),
    "qwen2_5_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14, mean=CLIP_MEAN,
                       std=CLIP_STD),
    "qwen3_vl": dict(min_pixels=65536, max_pixels=16777216, patch_size=16, mean=[0.5] * 3,
                     std=[0.5] * 3),
}


def hf_qwen(cls: Any, family: str, **overrides: Any) -> Any:
    """cls (Qwen2VLImageProcessorPil or the torchvision Qwen2VLImageProcessor) built from
    family's hub config (min_pixels / max_pixels / patch_size overridable), and checked through
    its attributes: a silently ignored keyword would make every comparison use the wrong
    oracle."""
    cfg = {**HUB_QWEN[family], **{k: v for k, v in overrides.items() if v is not None}}
    proc = cls(size={"shortest_edge": cfg["min_pixels"], "longest_edge": cfg["max_pixels"]},
               patch_size=cfg["patch_size"], temporal_patch_size=2, merge_size=2,
               image_mean=list(cfg["mean"]), image_std=list(cfg["std"]))
    assert proc.size["shortest_edge"] == cfg["min_pixels"]
    assert proc.size["longest_edge"] == cfg["max_pixels"]
    assert proc.patch_size == cfg["patch_size"]
    assert proc.merge_size == 2 and proc.temporal_patch_size == 2
    assert list(proc.image_mean) == list(cfg["mean"])
    assert list(proc.image_std) == list(cfg["std"])
    return proc
