"""Tiny local model folders for engine tests and benchmarks.

A real family's image processor config, a small config.json, and a BPE tokenizer trained here
(byte-level; Gemma 3's SentencePiece-style) with the family's special tokens and a chat template.
No weights: the engines' preprocessing never loads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .oracles import CLIP_MEAN, CLIP_STD

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")

# Written here, not copied: each message's images and videos become Qwen's vision placeholders,
# in order.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}"
    "{% if c['type'] in ('image', 'image_url', 'image_pil') %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] in ('video', 'video_url') %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

# The hub checkpoints' preprocessor_config.json values (Qwen2-VL-7B-Instruct, Qwen2.5-VL-7B-
# Instruct, Qwen3-VL-8B-Instruct), with the class name an engine's environment resolves.
QWEN_PREPROCESSOR = {
    "qwen2_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2,
                     merge_size=2, image_mean=CLIP_MEAN, image_std=CLIP_STD,
                     processor_class="Qwen2VLProcessor"),
    "qwen2_5_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14,
                       temporal_patch_size=2, merge_size=2, image_mean=CLIP_MEAN,
                       image_std=CLIP_STD, processor_class="Qwen2_5_VLProcessor"),
    "qwen3_vl": dict(size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16,
                     temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                     image_std=[0.5] * 3, processor_class="Qwen3VLProcessor"),
}

# A video_preprocessor_config.json in the shape of Qwen3-VL-8B-Instruct's: transformers' class by
# name and the video pixel budget (4096 to 25165824 pixels over a video's frames).
QWEN3_VIDEO_PREPROCESSOR = dict(size={"shortest_edge": 4096, "longest_edge": 25165824},
                                patch_size=16, temporal_patch_size=2, merge_size=2,
                                image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                processor_class="Qwen3VLProcessor",
                                video_processor_type="Qwen3VLVideoProcessor")

_ARCHITECTURES = {"qwen2_vl": "Qwen2VLForConditionalGeneration",
                  "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
                  "qwen3_vl": "Qwen3VLForConditionalGeneration"}


def _write_tokenizer(folder: Path, special: tuple[str, ...] = SPECIAL_TOKENS,
                     eos: str = "<|im_end|>", pad: str = "<|endoftext|>",
                     template: str = CHAT_TEMPLATE,
                     named: dict[str, str] | None = None) -> dict[str, int]:
    """Trains a ~400-token byte-level BPE with the special tokens; returns their ids.

    named: tokens the tokenizer names (``{"image_token": ...}``, as processors read them)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(special),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["You are a helpful assistant. Describe these images: what is in each picture?"]
    tok.train_from_iterator(corpus * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad,
                                   chat_template=template,
                                   **({"extra_special_tokens": named} if named else {}))
    fast.save_pretrained(str(folder))
    return {t: fast.convert_tokens_to_ids(t) for t in special}


def _model_config(family: str, ids: dict[str, int], vocab: int) -> dict[str, Any]:
    """A config.json small enough to build instantly (the engines read only its shape fields)."""
    text = {"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 32768, "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"], "torch_dtype": "bfloat16",
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
    if family == "qwen3_vl":
        text.update(model_type="qwen3_vl_text", head_dim=32,
                    rope_scaling={"rope_type": "default", "mrope_section": [4, 6, 6],
                                  "mrope_interleaved": True})
        vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                  "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
                  "temporal_patch_size": 2, "out_hidden_size": 64,
                  "num_position_embeddings": 2304, "deepstack_visual_indexes": []}
    else:
        text["model_type"] = f"{family}_text"
        vision = {"depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2,
                  "in_chans": 3, "patch_size": 14, "spatial_merge_size": 2,
                  "temporal_patch_size": 2}
        if family == "qwen2_5_vl":
            vision.update(intermediate_size=64, out_hidden_size=64, window_size=112,
                          fullatt_block_indexes=[0])
    return {"architectures": [_ARCHITECTURES[family]], "model_type": family,
            "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"],
            "vision_end_token_id": ids["<|vision_end|>"], "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"], "text_config": text, "vision_config": vision,
            "torch_dtype": "bfloat16", "vocab_size": vocab}


def make_qwen_folder(folder: str | Path, family: str = "qwen2_vl",
                     image_processor_type: str = "Qwen2VLImageProcessor",
                     video: dict[str, Any] | None = None) -> Path:
    """Writes a tiny Qwen-family model folder (config, real preprocessor values, tokenizer).

    video: the keys of a video_preprocessor_config.json to write (none by default: transformers
    then reads the video settings from preprocessor_config.json)."""
    if family not in QWEN_PREPROCESSOR:
        raise ValueError(f"no tiny folder for {family!r}; one of {sorted(QWEN_PREPROCESSOR)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = _write_tokenizer(folder)
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    (folder / "config.json").write_text(json.dumps(_model_config(family, ids, vocab), indent=1))
    pre = {**QWEN_PREPROCESSOR[family], "image_processor_type": image_processor_type}
    (folder / "preprocessor_config.json").write_text(json.dumps(pre, indent=1))
    if video is not None:
        (folder / "video_preprocessor_config.json").write_text(json.dumps(video, indent=1))
    return folder


GLM_SPECIAL_TOKENS = ("<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>",
                      "<|assistant|>", "<|observation|>", "<|begin_of_image|>",
                      "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>",
                      "<|video|>")

# Written here, not copied: GLM-4.1V's turn markers, each image as <|begin_of_image|><|image|>
# <|end_of_image|> where it stands in the message (the placeholder vLLM's GLM model declares).
GLM_CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}"
    "{% if c['type'] in ('image', 'image_url', 'image_pil') %}"
    "<|begin_of_image|><|image|><|end_of_image|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")

# The hub checkpoints' preprocessor_config.json values: zai-org/GLM-4.1V-9B-Thinking and
# zai-org/GLM-OCR both publish size 12544..9633792 (the class default in transformers'
# models/glm4v/image_processing_glm4v.py is 12544..11760000) with the class defaults patch 14,
# temporal 2, merge 2, OpenAI CLIP mean/std; GLM-OCR names the GLM-4.6V classes.
_GLM_SIZE = dict(size={"shortest_edge": 12544, "longest_edge": 9633792}, do_rescale=True,
                 patch_size=14, temporal_patch_size=2, merge_size=2, image_mean=CLIP_MEAN,
                 image_std=CLIP_STD)
GLM_PREPROCESSOR = {
    "glm4v": {**_GLM_SIZE, "image_processor_type": "Glm4vImageProcessor",
              "processor_class": "Glm4vProcessor"},
    "glm_ocr": {**_GLM_SIZE, "image_processor_type": "Glm46VImageProcessor",
                "processor_class": "Glm46VProcessor"},
}
_GLM_ARCHITECTURES = {"glm4v": "Glm4vForConditionalGeneration",
                      "glm_ocr": "GlmOcrForConditionalGeneration"}


def _glm_config(family: str, ids: dict[str, int], vocab: int) -> dict[str, Any]:
    """A tiny GLM-4.1V / GLM-OCR config.json, the checkpoints' layout shrunk.

    Partial rotary 0.5, M-RoPE sections summing to half the rotary dims, GLM's token ids."""
    text = {"model_type": f"{family}_text", "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "partial_rotary_factor": 0.5,
            "max_position_embeddings": 32768, "attention_bias": True,
            "eos_token_id": ids["<|endoftext|>"], "pad_token_id": ids["<|endoftext|>"],
            "torch_dtype": "bfloat16",
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "partial_rotary_factor": 0.5, "mrope_section": [2, 3, 3]}}
    vision = {"model_type": f"{family}_vision", "depth": 1, "hidden_size": 32, "num_heads": 2,
              "intermediate_size": 64, "out_hidden_size": 64, "in_channels": 3,
              "image_size": 336, "patch_size": 14, "spatial_merge_size": 2,
              "temporal_patch_size": 2}
    return {"architectures": [_GLM_ARCHITECTURES[family]], "model_type": family,
            "image_token_id": ids["<|image|>"], "video_token_id": ids["<|video|>"],
            "image_start_token_id": ids["<|begin_of_image|>"],
            "image_end_token_id": ids["<|end_of_image|>"],
            "video_start_token_id": ids["<|begin_of_video|>"],
            "video_end_token_id": ids["<|end_of_video|>"], "text_config": text,
            "vision_config": vision, "torch_dtype": "bfloat16", "vocab_size": vocab}


def make_glm_folder(folder: str | Path, family: str = "glm4v") -> Path:
    """Writes a tiny GLM-4.1V-9B or GLM-OCR folder (config, hub preprocessor values, tokens)."""
    if family not in GLM_PREPROCESSOR:
        raise ValueError(f"no tiny folder for {family!r}; one of {sorted(GLM_PREPROCESSOR)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = _write_tokenizer(folder, GLM_SPECIAL_TOKENS, eos="<|endoftext|>", pad="<|endoftext|>",
                           template=GLM_CHAT_TEMPLATE)
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    (folder / "config.json").write_text(json.dumps(_glm_config(family, ids, vocab), indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(GLM_PREPROCESSOR[family],
                                                                indent=1))
    return folder


# moonshotai/Kimi-VL-A3B-Instruct's preprocessor_config.json (remote code: its auto_map).
KIMI_VL_PREPROCESSOR = {
    "in_token_limit": 4096, "patch_size": 14, "merge_kernel_size": [2, 2], "pad_input": True,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "num_pooled_tokens": 1024,
    "auto_map": {"AutoImageProcessor": "image_processing_kimi_vl.KimiVLImageProcessor",
                 "AutoProcessor": "processing_kimi_vl.KimiVLProcessor"}}


def make_kimi_vl_folder(folder: str | Path, **preprocessor: Any) -> Path:
    """Writes a Kimi-VL-A3B-Instruct folder's config.json and preprocessor_config.json.

    preprocessor: keys that replace the hub's."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "kimi_vl"}))
    (folder / "preprocessor_config.json").write_text(json.dumps({**KIMI_VL_PREPROCESSOR,
                                                                 **preprocessor}))
    return folder


LLAVA_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", "<image>")

# Written here, not copied: LLaVA-1.5's "USER: ... ASSISTANT:" turns, each image as <image>
# where it stands in the message (what LlavaProcessor expands).
LLAVA_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'].upper() }}: "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}"
    "{% if c['type'] in ('image', 'image_url', 'image_pil') %}<image>\n"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}")

# llava-hf/llava-1.5-7b-hf's preprocessor_config.json: transformers' CLIP image processor, a
# class smg-fast does not serve.
LLAVA_PREPROCESSOR = dict(image_processor_type="CLIPImageProcessor",
                          processor_class="LlavaProcessor", crop_size={"height": 336, "width": 336},
                          size={"shortest_edge": 336}, do_center_crop=True, do_convert_rgb=True,
                          do_normalize=True, do_rescale=True, do_resize=True, resample=3,
                          rescale_factor=1 / 255, image_mean=CLIP_MEAN, image_std=CLIP_STD)


def make_llava_folder(folder: str | Path) -> Path:
    """Writes a tiny llava-1.5-7b-hf folder (config, the hub's preprocessor values, tokenizer).

    A model whose image processor (transformers' ``CLIPImageProcessor``) smg-fast does not serve:
    the engine tests' case where the plug-in must leave transformers' processor in place."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = _write_tokenizer(folder, LLAVA_SPECIAL_TOKENS, eos="</s>", pad="<pad>",
                           template=LLAVA_CHAT_TEMPLATE, named={"image_token": "<image>"})
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    text = {"model_type": "llama", "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "max_position_embeddings": 32768,
            "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"], "torch_dtype": "bfloat16"}
    vision = {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 336,
              "patch_size": 14, "projection_dim": 64}
    config = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
              "image_token_index": ids["<image>"], "pad_token_id": ids["<pad>"],
              "projector_hidden_act": "gelu", "vision_feature_layer": -2,
              "vision_feature_select_strategy": "default", "text_config": text,
              "vision_config": vision, "torch_dtype": "bfloat16", "vocab_size": vocab}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "preprocessor_config.json").write_text(json.dumps(LLAVA_PREPROCESSOR, indent=1))
    (folder / "processor_config.json").write_text(json.dumps(
        {"image_token": "<image>", "num_additional_image_tokens": 1, "patch_size": 14,
         "processor_class": "LlavaProcessor", "vision_feature_select_strategy": "default"},
        indent=1))
    return folder
