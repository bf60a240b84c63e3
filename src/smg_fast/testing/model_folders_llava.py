"""LLaVA-NeXT and LLaVA-OneVision model folders: the checkpoints' configuration files, no weights.

config.json (the model type, architecture and the fields the processors read), the hub's
preprocessor_config.json values (smg_fast.testing.oracles.HUB_LLAVA) naming transformers'
classes, and processor_config.json, as llava-hf/llava-v1.6-mistral-7b-hf and
llava-hf/llava-onevision-qwen2-7b-ov-hf publish them (written from transformers' docs, tests and
class defaults: the hub was not reachable where they were written). No tokenizer: no engine
test uses these folders yet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .oracles import HUB_LLAVA

# family -> (preprocessor class, architecture, config.json fields, processor_config.json)
_CHECKPOINTS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "llava_next": (
        "LlavaNextImageProcessor", "LlavaNextForConditionalGeneration",
        {"image_token_index": 32000, "vision_feature_layer": -2,
         "vision_feature_select_strategy": "default",
         "text_config": {"model_type": "mistral"},
         "vision_config": {"model_type": "clip_vision_model", "image_size": 336,
                           "patch_size": 14}},
        {"processor_class": "LlavaNextProcessor", "image_token": "<image>", "patch_size": 14,
         "num_additional_image_tokens": 1, "vision_feature_select_strategy": "default"}),
    "llava_onevision": (
        "LlavaOnevisionImageProcessor", "LlavaOnevisionForConditionalGeneration",
        {"image_token_index": 151646, "video_token_index": 151647, "vision_feature_layer": -1,
         "vision_feature_select_strategy": "full", "vision_aspect_ratio": "anyres_max_9",
         "text_config": {"model_type": "qwen2"},
         "vision_config": {"model_type": "siglip_vision_model", "image_size": 384,
                           "patch_size": 14}},
        {"processor_class": "LlavaOnevisionProcessor", "image_token": "<image>",
         "video_token": "<video>", "num_image_tokens": 729,
         "vision_feature_select_strategy": "full", "vision_aspect_ratio": "anyres_max_9"}),
}


def llava_preprocessor(family: str, **overrides: Any) -> dict[str, Any]:
    """The hub's preprocessor_config.json of family, with overrides."""
    cls = _CHECKPOINTS[family][0]
    return {**HUB_LLAVA[family], "image_processor_type": cls,
            "processor_class": _CHECKPOINTS[family][3]["processor_class"],
            "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
            **overrides}


def make_llava_tiles_folder(folder: str | Path, family: str = "llava_next",
                            **preprocessor: Any) -> Path:
    """Writes a llava_next or llava_onevision folder's configuration files; returns it.

    preprocessor: keys replacing the hub's preprocessor_config.json values."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _, arch, config, processor = _CHECKPOINTS[family]
    grid = {"image_grid_pinpoints": HUB_LLAVA[family]["image_grid_pinpoints"]}
    (folder / "config.json").write_text(json.dumps(
        {"architectures": [arch], "model_type": family, **grid, **config}, indent=1))
    (folder / "preprocessor_config.json").write_text(
        json.dumps(llava_preprocessor(family, **preprocessor), indent=1))
    (folder / "processor_config.json").write_text(json.dumps(processor, indent=1))
    return folder


__all__ = ["llava_preprocessor", "make_llava_tiles_folder"]
