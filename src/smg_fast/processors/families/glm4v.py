"""GLM-4.1V / GLM-4.5V / GLM-4.6V / GLM-OCR: Qwen's patches under GLM's smart_resize.

transformers' Glm4vImageProcessor(Pil) and its Glm46VImageProcessor(Pil) twin compute Qwen2-VL's
pipeline (BICUBIC, CLIP mean/std, merge-ordered patches with the temporal copy, output
[sum(gh*gw), 3*T*P*P] and ``image_grid_thw``) with their own size rule: the temporal factor counts
against the pixel budget, images with a side under the factor are first scaled up (not refused),
and the aspect limit is checked after that. Registers two families sharing one processor: glm4v
(GLM-4.1V, GLM-4.5V, GLM-OCR) and glm46v (GLM-4.6V), each with its transformers class names."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidImageError
from ..config import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, ProcessorConfig
from ..hooks import CallRules, DropIn, Reference
from ..plan import Plan, check_aspect
from ..registry import Family, register
from . import qwen
from .qwen import QwenVLProcessor, smart_resize


def glm_size(height: int, width: int, factor: int, temporal: int, min_pixels: int,
             max_pixels: int) -> tuple[int, int]:
    """(height, width) GLM's smart_resize gives a still image (temporal copies of one frame).

    A side under factor first scales the image up (truncated to int), the aspect limit is then
    checked on that size (ValueError), and the budget counts temporal x height x width."""
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"absolute aspect ratio must be at most 200 after scaling up to "
                         f"{width}x{height}")
    return smart_resize(height, width, factor, min_pixels, max_pixels, frames=temporal)


class Glm4vProcessor(QwenVLProcessor):
    """Qwen's merge-ordered patches with the temporal copy, sized by GLM's smart_resize."""

    def plan(self, width: int, height: int, index: int = 0) -> Plan:
        cfg = self.config
        check_aspect(index, width, height, limit=float("inf"))  # zero sizes; GLM scales first
        factor = cfg.patch_size * cfg.merge_size
        try:
            h, w = glm_size(height, width, factor, cfg.temporal_patch_size, cfg.min_pixels,
                            cfg.max_pixels)
        except ValueError as exc:
            raise InvalidImageError(index, f"{width}x{height}: {exc}") from None
        return Plan(resize_w=w, resize_h=h, grid_h=h // cfg.patch_size, grid_w=w // cfg.patch_size)


# transformers' Glm4vImageProcessorPil class attributes (Glm46V's are the same): what a model
# folder's preprocessor_config.json lacks takes these.
HF_CLASS_DEFAULTS: dict[str, Any] = {
    "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 112 * 112,
    "max_pixels": 28 * 28 * 15000, "image_mean": OPENAI_CLIP_MEAN, "image_std": OPENAI_CLIP_STD,
    "rescale_factor": 1 / 255, "resample": 3,
}
_SIZE_KEYS = {"shortest_edge", "longest_edge"}


def _size(size: dict[str, Any]) -> dict[str, Any]:
    """GLM's ``size``: exactly shortest_edge and longest_edge (its resize reads nothing else)."""
    if set(size) != _SIZE_KEYS:
        raise ValueError(f"size must contain 'shortest_edge' and 'longest_edge', got {size}")
    return {"min_pixels": int(size["shortest_edge"]), "max_pixels": int(size["longest_edge"])}


def read_folder(pre: dict[str, Any]) -> dict[str, Any]:
    """The fields of a GLM preprocessor_config.json.

    Qwen's keys, but the budget is ``size`` alone: transformers' GLM classes keep a top-level
    min_pixels / max_pixels as a plain attribute that changes nothing."""
    size = pre.get("size")
    if size is not None:
        if not isinstance(size, dict):
            raise ValueError(f"size must be a mapping, got {type(size).__name__}")
        _size({k: v for k, v in size.items() if v is not None})
    return qwen.read_folder({k: v for k, v in pre.items() if k not in ("min_pixels",
                                                                       "max_pixels")})


CALLS = CallRules({k: k for k in ("patch_size", "merge_size", "temporal_patch_size")}, _size)


def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
    """The GLM attributes transformers' class holds."""
    return dict(temporal_patch_size=cfg.temporal_patch_size,
                size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels})


def _count_patches(proc: Any, height: int, width: int, kw: dict[str, Any]) -> int:
    """Grid cells for an image of this size, as transformers' get_number_of_image_patches.

    Its temporal factor is the class's own, whatever the call options say."""
    size = kw.get("size", proc.size)
    patch = kw.get("patch_size", proc.patch_size)
    factor = patch * kw.get("merge_size", proc.merge_size)
    h, w = glm_size(height, width, factor, proc.temporal_patch_size, size["shortest_edge"],
                    size["longest_edge"])
    return (h // patch) * (w // patch)


def _family(name: str, cls: str, module: str, builtin: ProcessorConfig,
            model_types: tuple[str, ...]) -> Family:
    """One GLM family whose transformers classes are cls / clsPil in models/module."""
    hf = f"transformers.models.{module}.image_processing"
    reference = Reference({"pil": f"{hf}_pil_{module}:{cls}Pil",
                           "torchvision": f"{hf}_{module}:{cls}"}, qwen._reference_kwargs)

    def call_kwargs() -> type:
        import importlib

        return getattr(importlib.import_module(f"{hf}_pil_{module}"), f"{cls}Kwargs")

    dropin = DropIn({cls: "torchvision", f"{cls}Pil": "pil"}, _attributes, call_kwargs,
                    lambda kwargs: name, count_patches=_count_patches,
                    in_engines=True)  # tests/engines/test_engine_{vllm,sglang}_glm.py
    return register(Family(name, Glm4vProcessor, builtin, qwen._OPTIONS, read_folder, CALLS,
                           HF_CLASS_DEFAULTS, qwen.validate, model_types=(name, *model_types),
                           recognizes=lambda pre: cls in str(pre.get("image_processor_type", "")),
                           reference=reference, dropin=dropin))


def _hub(name: str) -> ProcessorConfig:
    """GLM-4.1V-9B-Thinking's published size (12544..9633792, patch 14, CLIP)."""
    return ProcessorConfig(name, 14, 2, 2, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, min_pixels=12544,
                           max_pixels=9633792)


_family("glm4v", "Glm4vImageProcessor", "glm4v", _hub("glm4v"), ("glm4v_moe", "glm_ocr"))
_family("glm46v", "Glm46VImageProcessor", "glm46v", _hub("glm46v"), ())

__all__ = ["Glm4vProcessor", "glm_size"]
