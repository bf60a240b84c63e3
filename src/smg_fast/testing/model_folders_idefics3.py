"""Idefics3 and SmolVLM model folders: their hub preprocessor_config.json and config.json.

Written from transformers' class defaults, its docs and tests, and what the checkpoints are known
to publish (no hub access here): HuggingFaceM4/Idefics3-8B-Llama3 (model_type idefics3,
Idefics3ImageProcessor, size 1456 / tiles 364), HuggingFaceTB/SmolVLM-Instruct (model_type
idefics3 too, 1536 / 384) and HuggingFaceTB/SmolVLM2-500M-Video-Instruct (model_type smolvlm,
SmolVLMImageProcessor, 2048 / 512). No weights and no tokenizer: the image processing reads
neither."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_COMMON = {"do_convert_rgb": True, "do_image_splitting": True, "do_normalize": True,
           "do_pad": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
           "image_std": [0.5, 0.5, 0.5], "resample": 1,
           "rescale_factor": 0.00392156862745098}

# checkpoint -> (config.json's model_type, preprocessor_config.json)
HUB_FOLDERS: dict[str, tuple[str, dict[str, Any]]] = {
    "HuggingFaceM4/Idefics3-8B-Llama3": ("idefics3", {
        **_COMMON, "image_processor_type": "Idefics3ImageProcessor",
        "processor_class": "Idefics3Processor", "max_image_size": {"longest_edge": 364},
        "size": {"longest_edge": 1456}}),
    "HuggingFaceTB/SmolVLM-Instruct": ("idefics3", {
        **_COMMON, "image_processor_type": "Idefics3ImageProcessor",
        "processor_class": "Idefics3Processor", "max_image_size": {"longest_edge": 384},
        "size": {"longest_edge": 1536}}),
    "HuggingFaceTB/SmolVLM2-500M-Video-Instruct": ("smolvlm", {
        **_COMMON, "image_processor_type": "SmolVLMImageProcessor",
        "processor_class": "SmolVLMProcessor", "max_image_size": {"longest_edge": 512},
        "size": {"longest_edge": 2048}}),
}
IDEFICS3 = "HuggingFaceM4/Idefics3-8B-Llama3"
SMOLVLM_INSTRUCT = "HuggingFaceTB/SmolVLM-Instruct"
SMOLVLM2 = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"


def hub_kwargs(checkpoint: str) -> dict[str, Any]:
    """The checkpoint's preprocessor_config.json keys transformers' classes take as arguments."""
    pre = HUB_FOLDERS[checkpoint][1]
    return {k: v for k, v in pre.items() if k not in ("image_processor_type", "processor_class")}


def make_idefics3_folder(folder: str | Path, checkpoint: str = IDEFICS3,
                         **preprocessor: Any) -> Path:
    """A folder with the checkpoint's config.json (model_type) and preprocessor_config.json.

    preprocessor: keys replacing the published ones."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model_type, pre = HUB_FOLDERS[checkpoint]
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    (folder / "preprocessor_config.json").write_text(json.dumps({**pre, **preprocessor}))
    return folder


__all__ = ["HUB_FOLDERS", "IDEFICS3", "SMOLVLM2", "SMOLVLM_INSTRUCT", "hub_kwargs",
           "make_idefics3_folder"]
