"""Tiny engine-ready folders of the tiling families: config, the hub's processor files, tokenizer.

LLaVA-NeXT, LLaVA-OneVision, Pixtral (its transformers format: model_type llava), Llama 4,
InternVL (its -hf format: model_type internvl), Idefics3 and SmolVLM. Each holds the
checkpoint's image processor settings (the values smg_fast.testing.oracles and
model_folders_idefics3 carry), the model's real architecture and model types with the encoder's
shape fields the engines read, shrunk text and vision stacks, and a small byte-level BPE tokenizer
with the family's special tokens and a chat template that writes each image as the placeholder
the family's transformers processor expands. No weights: the engines' request processing never
loads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model_folders import _write_tokenizer
from .model_folders_idefics3 import HUB_FOLDERS, SMOLVLM2
from .model_folders_idefics3 import IDEFICS3 as IDEFICS3_CHECKPOINT
from .model_folders_llava import llava_preprocessor
from .oracles import HUB_INTERNVL, HUB_LLAMA4, HUB_LLAVA, HUB_PIXTRAL

FAMILIES = ("llava_next", "llava_onevision", "pixtral", "llama4", "internvl", "idefics3",
            "smolvlm")


def _template(image: str, bos: str = "") -> str:
    """A chat template (written here) putting image in place of each image part, in order."""
    return (
        bos + "{% for m in messages %}<|turn|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
        "{% for c in m['content'] %}"
        "{% if c['type'] in ('image', 'image_url', 'image_pil') %}" + image +
        "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|turn|>assistant\n{% endif %}")


def _text(model_type: str, ids: dict[str, int], vocab: int, **fields: Any) -> dict[str, Any]:
    """A one-layer text stack of model_type."""
    return {"model_type": model_type, "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 32768,
            "bos_token_id": ids["<s>"], "eos_token_id": ids["<|end|>"],
            "pad_token_id": ids["<pad>"], "torch_dtype": "bfloat16", **fields}


def _vision(model_type: str, **fields: Any) -> dict[str, Any]:
    """A one-layer vision stack of model_type; fields: the checkpoint's shape fields."""
    return {"model_type": model_type, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_channels": 3, **fields}


def _write(folder: Path, config: dict[str, Any], files: dict[str, dict[str, Any]]) -> Path:
    """config.json and the processor files (name -> contents) in folder."""
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for name, contents in files.items():
        (folder / name).write_text(json.dumps(contents, indent=1))
    return folder


_BASE = ("<s>", "<pad>", "<|turn|>", "<|end|>")
# family -> (special tokens, the tokenizer's named tokens, the chat template's image placeholder)
_TOKENS: dict[str, tuple[tuple[str, ...], dict[str, str], str]] = {
    "llava_next": (("<image>",), {"image_token": "<image>"}, "<image>\n"),
    "llava_onevision": (("<image>", "<video>"), {"image_token": "<image>",
                                                 "video_token": "<video>"}, "<image>\n"),
    "pixtral": (("[IMG]", "[IMG_BREAK]", "[IMG_END]"), {}, "[IMG]"),
    "llama4": (("<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>",
                "<|tile_x_separator|>", "<|tile_y_separator|>"), {}, "<|image|>"),
    "internvl": (("<img>", "</img>", "<IMG_CONTEXT>", "<video>"),
                 {"start_image_token": "<img>", "end_image_token": "</img>",
                  "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"},
                 "<IMG_CONTEXT>\n"),
    "idefics3": (("<image>", "<fake_token_around_image>", "<global-img>",
                  "<end_of_utterance>", *(f"<row_{r}_col_{c}>" for r in range(1, 7)
                                          for c in range(1, 7))), {}, "<image>"),
}
_TOKENS["smolvlm"] = (_TOKENS["idefics3"][0],
                      {"image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
                       "global_image_token": "<global-img>",
                       "end_of_utterance_token": "<end_of_utterance>"}, "<image>")


def _llava_next(ids: dict[str, int], vocab: int, family: str) -> tuple[dict, dict]:
    """llava-hf/llava-v1.6-mistral-7b-hf / llava-onevision-qwen2-7b-ov-hf."""
    grid = {"image_grid_pinpoints": HUB_LLAVA[family]["image_grid_pinpoints"]}
    if family == "llava_next":
        config = {"architectures": ["LlavaNextForConditionalGeneration"],
                  "image_token_index": ids["<image>"], "vision_feature_layer": -2,
                  "vision_feature_select_strategy": "default",
                  "text_config": _text("mistral", ids, vocab),
                  "vision_config": _vision("clip_vision_model", image_size=336, patch_size=14,
                                           projection_dim=64)}
        processor = {"processor_class": "LlavaNextProcessor", "image_token": "<image>",
                     "patch_size": 14, "num_additional_image_tokens": 1,
                     "vision_feature_select_strategy": "default"}
    else:
        config = {"architectures": ["LlavaOnevisionForConditionalGeneration"],
                  "image_token_index": ids["<image>"], "video_token_index": ids["<video>"],
                  "vision_feature_layer": -1, "vision_feature_select_strategy": "full",
                  "vision_aspect_ratio": "anyres_max_9",
                  "text_config": _text("qwen2", ids, vocab),
                  "vision_config": _vision("siglip_vision_model", image_size=384,
                                           patch_size=14)}
        processor = {"processor_class": "LlavaOnevisionProcessor", "image_token": "<image>",
                     "video_token": "<video>", "num_image_tokens": 729,
                     "vision_feature_select_strategy": "full",
                     "vision_aspect_ratio": "anyres_max_9"}
    config.update(model_type=family, projector_hidden_act="gelu", **grid)
    return config, {"preprocessor_config.json": llava_preprocessor(family),
                    "processor_config.json": processor}


def _pixtral(ids: dict[str, int], vocab: int) -> tuple[dict, dict]:
    """mistral-community/pixtral-12b: a llava config whose encoder is Pixtral's."""
    config = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
              "image_token_index": ids["[IMG]"], "projector_hidden_act": "gelu",
              "vision_feature_layer": -1, "vision_feature_select_strategy": "full",
              "text_config": _text("mistral", ids, vocab),
              "vision_config": _vision("pixtral", image_size=1024, patch_size=16, head_dim=16,
                                       rope_theta=10000.0, hidden_act="gelu")}
    pre = {**HUB_PIXTRAL, "image_processor_type": "PixtralImageProcessor",
           "processor_class": "PixtralProcessor", "do_normalize": True, "do_rescale": True,
           "do_resize": True}
    processor = {"processor_class": "PixtralProcessor", "image_token": "[IMG]",
                 "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]",
                 "patch_size": 16, "spatial_merge_size": 1}
    return config, {"preprocessor_config.json": pre, "processor_config.json": processor}


def _llama4(ids: dict[str, int], vocab: int) -> tuple[dict, dict]:
    """meta-llama/Llama-4-Scout-17B-16E-Instruct."""
    text = _text("llama4_text", ids, vocab, head_dim=32, num_local_experts=1,
                 num_experts_per_tok=1, intermediate_size_mlp=128, interleave_moe_layer_step=1,
                 no_rope_layers=[1], attention_chunk_size=8192, use_qk_norm=True,
                 rope_theta=500000.0)
    vision = _vision("llama4_vision_model", image_size=336, patch_size=14,
                     pixel_shuffle_ratio=0.5, projector_input_dim=64, projector_output_dim=64,
                     vision_output_dim=64, rope_theta=10000, norm_eps=1e-5,
                     vision_feature_layer=-1, vision_feature_select_strategy="default")
    config = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
              "boi_token_index": ids["<|image_start|>"], "eoi_token_index": ids["<|image_end|>"],
              "image_token_index": ids["<|patch|>"], "text_config": text,
              "vision_config": vision, "torch_dtype": "bfloat16"}
    pre = {**HUB_LLAMA4, "image_processor_type": "Llama4ImageProcessor",
           "processor_class": "Llama4Processor", "do_normalize": True, "do_rescale": True,
           "do_resize": True}
    processor = {"processor_class": "Llama4Processor", "fake_image_token": "<|image|>",
                 "image_token": "<|image|>", "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                 "start_of_image_token": "<|image_start|>", "end_of_image_token": "<|image_end|>"}
    return config, {"preprocessor_config.json": pre, "processor_config.json": processor}


def _internvl(ids: dict[str, int], vocab: int) -> tuple[dict, dict]:
    """OpenGVLab/InternVL3-1B-hf."""
    vision = _vision("internvl_vision", image_size=[448, 448], patch_size=[14, 14],
                     use_mean_pooling=True)
    config = {"architectures": ["InternVLForConditionalGeneration"], "model_type": "internvl",
              "image_token_id": ids["<IMG_CONTEXT>"], "downsample_ratio": 0.5,
              "projector_hidden_act": "gelu", "vision_feature_layer": -1,
              "vision_feature_select_strategy": "default",
              "text_config": _text("qwen2", ids, vocab, architectures=["Qwen2ForCausalLM"]),
              "vision_config": vision, "torch_dtype": "bfloat16"}
    pre = {**HUB_INTERNVL, "image_processor_type": "GotOcr2ImageProcessor",
           "processor_class": "InternVLProcessor", "do_convert_rgb": True,
           "do_normalize": True, "do_rescale": True, "do_resize": True}
    video = {"video_processor_type": "InternVLVideoProcessor",
             "processor_class": "InternVLProcessor", "size": {"height": 448, "width": 448},
             "resample": 3, "rescale_factor": 1 / 255, "image_mean": HUB_INTERNVL["image_mean"],
             "image_std": HUB_INTERNVL["image_std"], "do_convert_rgb": True,
             "do_normalize": True, "do_rescale": True, "do_resize": True}
    processor = {"processor_class": "InternVLProcessor", "image_seq_length": 256}
    return config, {"preprocessor_config.json": pre, "video_preprocessor_config.json": video,
                    "processor_config.json": processor}


def _idefics3(ids: dict[str, int], vocab: int, family: str) -> tuple[dict, dict]:
    """HuggingFaceM4/Idefics3-8B-Llama3 / HuggingFaceTB/SmolVLM2-500M-Video-Instruct."""
    checkpoint = IDEFICS3_CHECKPOINT if family == "idefics3" else SMOLVLM2
    pre = dict(HUB_FOLDERS[checkpoint][1])
    tile = pre["max_image_size"]["longest_edge"]
    patch, scale = (14, 2) if family == "idefics3" else (16, 4)
    seq = (tile // patch) ** 2 // scale ** 2
    arch = "Idefics3ForConditionalGeneration" if family == "idefics3" else \
        "SmolVLMForConditionalGeneration"
    config = {"architectures": [arch], "model_type": family, "image_token_id": ids["<image>"],
              "scale_factor": scale, "pad_token_id": ids["<pad>"],
              "text_config": _text("llama", ids, vocab),
              "vision_config": _vision(f"{family}_vision", image_size=tile, patch_size=patch),
              "torch_dtype": "bfloat16"}
    processor = {"processor_class": pre["processor_class"], "image_seq_len": seq}
    files = {"preprocessor_config.json": pre, "processor_config.json": processor}
    if family == "smolvlm":
        files["video_preprocessor_config.json"] = {
            **{k: v for k, v in pre.items() if k not in ("image_processor_type",
                                                          "do_image_splitting")},
            "video_processor_type": "SmolVLMVideoProcessor", "do_image_splitting": False,
            "size": {"longest_edge": tile}, "fps": 1, "max_frames": 64,
            "video_sampling": {"fps": 1, "max_frames": 64,
                               "video_size": {"longest_edge": tile}}}
    return config, files


def make_tiles_folder(folder: str | Path, family: str) -> Path:
    """Writes family's tiny engine folder (one of FAMILIES); returns it."""
    if family not in _TOKENS:
        raise ValueError(f"unknown family {family!r}: one of {FAMILIES}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    special, named, image = _TOKENS[family]
    ids = _write_tokenizer(folder, (*_BASE, *special), eos="<|end|>", pad="<pad>",
                           template=_template(image), named=named or None)
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    if family in ("llava_next", "llava_onevision"):
        config, files = _llava_next(ids, vocab, family)
    elif family in ("idefics3", "smolvlm"):
        config, files = _idefics3(ids, vocab, family)
    else:
        config, files = {"pixtral": _pixtral, "llama4": _llama4,
                         "internvl": _internvl}[family](ids, vocab)
    config.setdefault("torch_dtype", "bfloat16")
    config.update(vocab_size=vocab, bos_token_id=ids["<s>"], eos_token_id=ids["<|end|>"])
    return _write(folder, config, files)


__all__ = ["FAMILIES", "make_tiles_folder"]
