"""Tiny PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR model folders for the engine tests.

Each: a small config.json of the checkpoint's layout, the hub's preprocessor values
(smg_fast.testing.oracles.HUB_QWEN_LIKE) naming transformers' classes, and a byte-level BPE
tokenizer trained here with the family's special tokens (its image token as the tokenizer's
``image_token``, as transformers' processors read it) and a chat template written here. No
weights: the engines' preprocessing never loads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model_folders import _write_tokenizer
from .oracles import QWEN_LIKE_CLASSES, qwen_like_kwargs

# Written here, not copied: each image as its start / placeholder / end tokens where it stands.
_TEMPLATE = (
    "{{ bos }}{% for m in messages %}{{ m['role'] }}: "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}"
    "{% if c['type'] in ('image', 'image_url', 'image_pil') %}{{ image }}"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}")

# family -> (special tokens: bos, eos, pad, image start, image, image end, video; the
# architecture; the processor class)
_TOKENS = {
    "paddleocr_vl": (("<s>", "</s>", "<unk>", "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>",
                      "<|IMAGE_END|>", "<|video_pad|>"),
                     "PaddleOCRVLForConditionalGeneration", "PaddleOCRVLProcessor"),
    "hunyuan_vl": (("<s>", "</s>", "<pad>", "<img_start>", "<img>", "<img_end>", "<img_nl>"),
                   "HunYuanVLForConditionalGeneration", "HunYuanVLProcessor"),
}


def _template(tokens: tuple[str, ...]) -> str:
    """_TEMPLATE with the family's bos and image tokens."""
    image = "".join(tokens[3:6])
    return _TEMPLATE.replace("{{ bos }}", tokens[0]).replace("{{ image }}", image)


def _paddle_config(ids: dict[str, int], tokens: tuple[str, ...], vocab: int) -> dict[str, Any]:
    """A tiny PaddlePaddle/PaddleOCR-VL config.json (ERNIE-4.5 text, SigLIP-style vision)."""
    text = {"model_type": "paddleocr_vl_text", "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 32768,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
            "torch_dtype": "bfloat16"}
    vision = {"model_type": "paddleocr_vl_vision", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_channels": 3,
              "image_size": 384, "patch_size": 14, "spatial_merge_size": 2,
              "tokens_per_second": 2}  # the checkpoint's M-RoPE rate (SGLang reads it)
    return {"architectures": ["PaddleOCRVLForConditionalGeneration"],
            "model_type": "paddleocr_vl", "image_token_id": ids[tokens[4]],
            "video_token_id": ids[tokens[6]], "vision_start_token_id": ids[tokens[3]],
            "vision_end_token_id": ids[tokens[5]], "bos_token_id": ids[tokens[0]],
            "eos_token_id": ids[tokens[1]], "pad_token_id": ids[tokens[2]],
            "text_config": text, "vision_config": vision, "torch_dtype": "bfloat16"}


def _hunyuan_config(ids: dict[str, int], tokens: tuple[str, ...], vocab: int) -> dict[str, Any]:
    """A tiny tencent/HunyuanOCR config.json (patch 16, merge 2, its image token ids)."""
    text = {"model_type": "hunyuan_vl_text", "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 32768,
            "pad_token_id": ids[tokens[2]], "bos_token_id": ids[tokens[0]],
            "eos_token_id": ids[tokens[1]], "torch_dtype": "bfloat16"}
    vision = {"model_type": "hunyuan_vl_vision", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_channels": 3,
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 1,
              "out_hidden_size": 64, "text_hidden_size": 64}
    return {"architectures": ["HunYuanVLForConditionalGeneration"], "model_type": "hunyuan_vl",
            "image_token_id": ids[tokens[4]], "im_start_id": ids[tokens[3]],
            "im_end_id": ids[tokens[5]], "im_newline_id": ids[tokens[6]],
            "bos_token_id": ids[tokens[0]], "eos_token_id": ids[tokens[1]],
            "pad_token_id": ids[tokens[2]], "text_config": text, "vision_config": vision,
            "torch_dtype": "bfloat16"}


_CONFIGS = {"paddleocr_vl": _paddle_config, "hunyuan_vl": _hunyuan_config}


def make_qwen_like_folder(folder: str | Path, family: str) -> Path:
    """Writes a tiny model folder of a HUB_QWEN_LIKE family (config, hub values, tokenizer)."""
    if family not in _TOKENS:
        raise ValueError(f"no tiny folder for {family!r}; one of {sorted(_TOKENS)}")
    tokens, _, processor = _TOKENS[family]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = _write_tokenizer(folder, tokens, eos=tokens[1], pad=tokens[2],
                           template=_template(tokens),
                           named={"image_token": tokens[4], "image_start_token": tokens[3],
                                  "image_end_token": tokens[5]})
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    (folder / "config.json").write_text(json.dumps(_CONFIGS[family](ids, tokens, vocab),
                                                   indent=1))
    pre = {**qwen_like_kwargs(family), "image_processor_type": QWEN_LIKE_CLASSES[family][1],
           "processor_class": processor}
    (folder / "preprocessor_config.json").write_text(json.dumps(pre, indent=1))
    return folder


__all__ = ["make_qwen_like_folder"]
