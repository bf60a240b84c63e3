"""Tiny Gemma 3, Gemma 3n and Gemma 4 model folders for the engine tests.

Each: a small config.json of the published checkpoint's layout (sizes shrunk, token ids this
tokenizer's), the hub's processor files, and a SentencePiece-style BPE tokenizer trained here
(spaces as U+2581, Gemma's newline runs as single tokens) whose named tokens are the family's
(``image_token``, ``boi_token``... as transformers' processors read them), with a chat template
written here. No weights: the engines' preprocessing never loads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Gemma's whitespace runs are single tokens (vLLM's Gemma 3 / 3n processors look up "\n" ..
# "\n\n\n\n")
_NEWLINES = ("\n", "\n\n", "\n\n\n", "\n\n\n\n")
_BASE_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>")


def _chat_template(start: str, end: str, image: str) -> str:
    """A Gemma chat template (written here, not copied).

    Each turn is start + role (the assistant's is "model") + newline .. end; each image is the
    placeholder ``image`` where it stands in the message."""
    return (
        "{{ bos_token }}{% for m in messages %}" + start +
        "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] | trim }}{% else %}"
        "{% for c in m['content'] %}"
        "{% if c['type'] in ('image', 'image_url', 'image_pil') %}" + image +
        "{% elif c['type'] == 'text' %}{{ c['text'] | trim }}{% endif %}"
        "{% endfor %}{% endif %}" + end + "\n{% endfor %}"
        "{% if add_generation_prompt %}" + start + "model\n{% endif %}")


GEMMA3_NAMED = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                "image_token": "<image_soft_token>"}
GEMMA3_SPECIAL_TOKENS = (*_BASE_TOKENS, "<start_of_turn>", "<end_of_turn>",
                         *GEMMA3_NAMED.values())
# Gemma 3's template puts <start_of_image> where an image stands (what Gemma3Processor expands)
GEMMA3_CHAT_TEMPLATE = _chat_template("<start_of_turn>", "<end_of_turn>", "<start_of_image>")

# google/gemma-3-4b-it's preprocessor_config.json (12b and 27b publish the same values).
GEMMA3_PREPROCESSOR = dict(image_processor_type="Gemma3ImageProcessor",
                           processor_class="Gemma3Processor", size={"height": 896, "width": 896},
                           resample=2, do_resize=True, do_rescale=True, rescale_factor=1 / 255,
                           do_normalize=True, image_mean=[0.5] * 3, image_std=[0.5] * 3,
                           do_convert_rgb=None, do_pan_and_scan=None,
                           pan_and_scan_min_crop_size=None, pan_and_scan_max_num_crops=None,
                           pan_and_scan_min_ratio_to_activate=None, image_seq_length=256)

# Gemma 3n's audio tokens beside Gemma 3's; its template puts <image_soft_token> where an image
# stands (Gemma3nProcessor expands it; vLLM's placeholder for the model)
GEMMA3N_NAMED = {**GEMMA3_NAMED, "audio_token": "<audio_soft_token>",
                 "boa_token": "<start_of_audio>", "eoa_token": "<end_of_audio>"}
GEMMA3N_SPECIAL_TOKENS = (*_BASE_TOKENS, "<start_of_turn>", "<end_of_turn>",
                          *GEMMA3N_NAMED.values())
GEMMA3N_CHAT_TEMPLATE = _chat_template("<start_of_turn>", "<end_of_turn>", "<image_soft_token>")

# google/gemma-3n-E4B-it's preprocessor_config.json (E2B publishes the same): one file holding
# both the SigLIP image processor's settings and Gemma3nAudioFeatureExtractor's.
GEMMA3N_PREPROCESSOR = dict(
    image_processor_type="SiglipImageProcessorFast", processor_class="Gemma3nProcessor",
    size={"height": 768, "width": 768}, resample=2, do_resize=True, do_rescale=True,
    rescale_factor=1 / 255, do_normalize=False, image_mean=[0.5] * 3, image_std=[0.5] * 3,
    do_convert_rgb=None, image_seq_length=256,
    feature_extractor_type="Gemma3nAudioFeatureExtractor", feature_size=128,
    sampling_rate=16000, padding_value=0.0, padding_side="right", return_attention_mask=True,
    frame_length=512, hop_length=160, fft_length=1024, min_frequency=125.0,
    max_frequency=7600.0, preemphasis=0.97, preemphasis_htk_flavor=True, fft_overdrive=True,
    dither=0.0, input_scale_factor=1.0, mel_floor=1e-5, per_bin_mean=None, per_bin_stddev=None)
GEMMA3N_PROCESSOR = {"audio_seq_length": 188, "image_seq_length": 256,
                     "processor_class": "Gemma3nProcessor"}

GEMMA4_NAMED = {"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
                "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>",
                "sot_token": "<|turn>", "eot_token": "<turn|>"}
GEMMA4_SPECIAL_TOKENS = (*_BASE_TOKENS, "<mask>", *GEMMA4_NAMED.values(), "<|video|>")
# Gemma 4's turns are <|turn>role .. <turn|>; an image is <|image|> where it stands (what
# Gemma4Processor expands, and the token vLLM's Gemma 4 processor replaces)
GEMMA4_CHAT_TEMPLATE = _chat_template("<|turn>", "<turn|>", "<|image|>")

# google/gemma-4-e2b-it's processor_config.json, transformers 5's layout: each part's settings
# nested under its key, no preprocessor_config.json. image_processor: the published block (no
# size: the budget decides); video_processor: Gemma4VideoProcessor's class defaults (assumed
# published as they are); feature_extractor: the published Gemma4AudioFeatureExtractor block.
GEMMA4_PROCESSOR = {
    "processor_class": "Gemma4Processor", "image_seq_length": 280, "audio_seq_length": 750,
    "audio_ms_per_token": 40,
    "image_processor": {
        "image_processor_type": "Gemma4ImageProcessor", "do_convert_rgb": True,
        "do_normalize": False, "do_rescale": True, "do_resize": True,
        "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0], "image_seq_length": 280,
        "max_soft_tokens": 280, "patch_size": 16, "pooling_kernel_size": 3, "resample": 3,
        "rescale_factor": 1 / 255},
    "video_processor": {
        "video_processor_type": "Gemma4VideoProcessor", "do_convert_rgb": True,
        "do_normalize": True, "do_rescale": True, "do_resize": True, "do_sample_frames": True,
        "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0], "max_soft_tokens": 70,
        "num_frames": 32, "patch_size": 16, "pooling_kernel_size": 3, "resample": 3,
        "rescale_factor": 1 / 255, "return_metadata": False},
    "feature_extractor": {
        "feature_extractor_type": "Gemma4AudioFeatureExtractor", "feature_size": 128,
        "sampling_rate": 16000, "padding_value": 0.0, "padding_side": "right",
        "return_attention_mask": True, "frame_length": 320, "hop_length": 160,
        "fft_length": 512, "fft_overdrive": False, "min_frequency": 0.0,
        "max_frequency": 8000.0, "preemphasis": 0.0, "preemphasis_htk_flavor": True,
        "dither": 0.0, "input_scale_factor": 1.0, "mel_floor": 0.001, "per_bin_mean": None,
        "per_bin_stddev": None},
}


def _write_tokenizer(folder: Path, special: tuple[str, ...], named: dict[str, str],
                     template: str) -> tuple[dict[str, int], int]:
    """A ~400-token SentencePiece-style BPE with the special tokens, saved in folder.

    Returns their ids and the vocabulary size. named: the tokens the tokenizer names
    (``{"image_token": ...}``, as Gemma's processors read them); <bos> is prepended."""
    import tokenizers
    from tokenizers import decoders, models, normalizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Replace("\u2581", " ")
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(special))
    corpus = ["You are a helpful assistant. Describe these images: what is in each picture?\n"
              "Here is the original image and here are some crops to help you see better."]
    tok.train_from_iterator(corpus * 4, trainer)
    tok.add_tokens([tokenizers.AddedToken(t, normalized=False) for t in _NEWLINES])
    bos = tok.token_to_id("<bos>")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                       special_tokens=[("<bos>", bos)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        unk_token="<unk>", chat_template=template, extra_special_tokens=named)
    fast.save_pretrained(str(folder))
    return {t: fast.convert_tokens_to_ids(t) for t in special}, len(fast)


def _text_config(model_type: str, ids: dict[str, int], vocab: int, eos: str,
                 **fields: Any) -> dict[str, Any]:
    """A Gemma text_config shrunk to one layer; fields: the generation's own keys."""
    return {"model_type": model_type, "vocab_size": vocab, "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 32768,
            "bos_token_id": ids["<bos>"], "eos_token_id": [ids["<eos>"], ids[eos]],
            "pad_token_id": ids["<pad>"], "torch_dtype": "bfloat16", **fields}


def _token_ids(ids: dict[str, int], named: dict[str, str], keys: dict[str, str]) -> dict[str, int]:
    """config.json's token id keys: keys maps each to a tokenizer name in named."""
    return {key: ids[named[name]] for key, name in keys.items()}


def _write(folder: Path, config: dict[str, Any], files: dict[str, dict[str, Any]]) -> Path:
    """config.json and the processor files (name -> contents) in folder."""
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for name, contents in files.items():
        (folder / name).write_text(json.dumps(contents, indent=1))
    return folder


def _folder(folder: str | Path, special: tuple[str, ...], named: dict[str, str],
            template: str) -> tuple[Path, dict[str, int], int]:
    """The folder made, its tokenizer written: (folder, token ids, vocabulary size)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids, vocab = _write_tokenizer(folder, special, named, template)
    return folder, ids, vocab


def make_gemma3_folder(folder: str | Path) -> Path:
    """Writes a tiny gemma-3-4b-it folder (config, the hub's preprocessor values, tokenizer).

    Its config: SigLIP 896 / 14, 256 tokens per image, shrunk."""
    folder, ids, vocab = _folder(folder, GEMMA3_SPECIAL_TOKENS, GEMMA3_NAMED,
                                 GEMMA3_CHAT_TEMPLATE)
    text = _text_config("gemma3_text", ids, vocab, "<end_of_turn>", query_pre_attn_scalar=32,
                        sliding_window=1024, sliding_window_pattern=6, rope_theta=1000000.0,
                        rope_local_base_freq=10000.0)
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 896,
              "patch_size": 14, "num_channels": 3, "vision_use_head": False}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              **_token_ids(ids, GEMMA3_NAMED, {"boi_token_index": "boi_token",
                                               "eoi_token_index": "eoi_token",
                                               "image_token_index": "image_token"}),
              "mm_tokens_per_image": 256, "bos_token_id": text["bos_token_id"],
              "eos_token_id": text["eos_token_id"], "pad_token_id": text["pad_token_id"],
              "text_config": text, "vision_config": vision, "torch_dtype": "bfloat16"}
    return _write(folder, config, {
        "preprocessor_config.json": GEMMA3_PREPROCESSOR,
        "processor_config.json": {"image_seq_length": GEMMA3_PREPROCESSOR["image_seq_length"],
                                  "processor_class": "Gemma3Processor"}})


def make_gemma3n_folder(folder: str | Path) -> Path:
    """Writes a tiny gemma-3n-E4B-it folder (config, the hub's processor files, tokenizer).

    Its config: the MobileNet-V5 vision tower's layout (768 px, 256 tokens per image), the
    audio tower's (188 tokens), one AltUp / LAuReL text layer, shrunk."""
    folder, ids, vocab = _folder(folder, GEMMA3N_SPECIAL_TOKENS, GEMMA3N_NAMED,
                                 GEMMA3N_CHAT_TEMPLATE)
    text = _text_config(
        "gemma3n_text", ids, vocab, "<end_of_turn>", intermediate_size=[128],
        layer_types=["full_attention"], activation_sparsity_pattern=[0.0], sliding_window=512,
        rope_theta=1000000.0, rope_local_base_freq=10000.0, final_logit_softcapping=30.0,
        vocab_size_per_layer_input=vocab, hidden_size_per_layer_input=16, altup_active_idx=0,
        altup_coef_clip=120.0, altup_correct_scale=True, altup_num_inputs=4,
        num_kv_shared_layers=0, laurel_rank=8, hidden_activation="gelu_pytorch_tanh")
    # the published vision_config names its 2 labels (timm's wrapper would look them up else)
    vision = {"model_type": "gemma3n_vision", "architecture": "mobilenetv5_300m_enc",
              "hidden_size": 64, "vocab_size": 128, "vocab_offset": vocab, "do_pooling": False,
              "model_args": None, "rms_norm_eps": 1e-6, "num_classes": 2,
              "label_names": ["LABEL_0", "LABEL_1"]}
    audio = {"model_type": "gemma3n_audio", "hidden_size": 32, "input_feat_size": 128,
             "vocab_size": 128, "vocab_offset": vocab + 128, "conf_num_attention_heads": 2,
             "conf_num_hidden_layers": 1, "sscp_conv_channel_size": [8, 4]}
    config = {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
              **_token_ids(ids, GEMMA3N_NAMED, {
                  "boi_token_id": "boi_token", "eoi_token_id": "eoi_token",
                  "image_token_id": "image_token", "boa_token_id": "boa_token",
                  "eoa_token_id": "eoa_token", "audio_token_id": "audio_token"}),
              "vision_soft_tokens_per_image": 256, "audio_soft_tokens_per_image": 188,
              "text_config": text, "vision_config": vision, "audio_config": audio,
              "torch_dtype": "bfloat16"}
    return _write(folder, config, {"preprocessor_config.json": GEMMA3N_PREPROCESSOR,
                                   "processor_config.json": GEMMA3N_PROCESSOR})


def make_gemma4_folder(folder: str | Path) -> Path:
    """Writes a tiny gemma-4-e2b-it folder (config, the hub's processor_config.json, tokenizer).

    Its config: the vision tower's layout (patch 16, pooling 3, 280 soft tokens), an audio
    tower, one text layer, shrunk; both eoa_token_id and eoa_token_index, as the published
    config.json holds them (SGLang reads the first, transformers' config class the second)."""
    folder, ids, vocab = _folder(folder, GEMMA4_SPECIAL_TOKENS, GEMMA4_NAMED,
                                 GEMMA4_CHAT_TEMPLATE)
    text = _text_config(
        "gemma4_text", ids, vocab, "<turn|>", global_head_dim=32,
        layer_types=["full_attention"], sliding_window=512, final_logit_softcapping=30.0,
        vocab_size_per_layer_input=vocab, hidden_size_per_layer_input=16,
        num_kv_shared_layers=0, attention_k_eq_v=False, enable_moe_block=False,
        use_double_wide_mlp=False, hidden_activation="gelu_pytorch_tanh",
        rope_parameters={"full_attention": {"rope_type": "proportional",
                                            "partial_rotary_factor": 0.25,
                                            "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    vision = {"model_type": "gemma4_vision", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
              "head_dim": 16, "patch_size": 16, "pooling_kernel_size": 3,
              "position_embedding_size": 10240, "default_output_length": 280,
              "standardize": False, "rope_parameters": {"rope_type": "default",
                                                        "rope_theta": 100.0}}
    audio = {"model_type": "gemma4_audio", "hidden_size": 32, "num_hidden_layers": 1,
             "num_attention_heads": 2, "subsampling_conv_channels": [8, 4],
             "output_proj_dims": 64}
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
              **_token_ids(ids, GEMMA4_NAMED, {
                  "boi_token_id": "boi_token", "eoi_token_id": "eoi_token",
                  "image_token_id": "image_token", "boa_token_id": "boa_token",
                  "eoa_token_id": "eoa_token", "eoa_token_index": "eoa_token",
                  "audio_token_id": "audio_token"}),
              "video_token_id": ids["<|video|>"], "vision_soft_tokens_per_image": 280,
              "eos_token_id": text["eos_token_id"], "text_config": text,
              "vision_config": vision, "audio_config": audio, "tie_word_embeddings": True,
              "dtype": "bfloat16"}
    return _write(folder, config, {"processor_config.json": GEMMA4_PROCESSOR})


PALIGEMMA_NAMED = {"image_token": "<image>"}
# PaliGemma is not a chat model: the template writes each message's text alone (vLLM inserts
# the image tokens before the prompt)
PALIGEMMA_CHAT_TEMPLATE = _chat_template("", "", "")
# google/paligemma2-3b-mix-224's preprocessor_config.json: transformers' SiglipImageProcessor at
# 224x224, BICUBIC, rescale 1/255, normalized with mean = std = 0.5.
PALIGEMMA_PREPROCESSOR = dict(
    image_processor_type="SiglipImageProcessor", processor_class="PaliGemmaProcessor",
    size={"height": 224, "width": 224}, resample=3, do_resize=True, do_rescale=True,
    rescale_factor=1 / 255, do_normalize=True, image_mean=[0.5] * 3, image_std=[0.5] * 3,
    do_convert_rgb=None, image_seq_length=256)


def make_paligemma_folder(folder: str | Path) -> Path:
    """Writes a tiny paligemma2-3b-mix-224 folder (config, the hub's preprocessor, tokenizer).

    A model of another type whose folder names transformers' SiglipImageProcessor, the class
    Gemma 3n's drop-in takes the name of. Its config: SigLIP 224 / 14 (256 tokens), a Gemma 2
    text layer, shrunk."""
    folder, ids, vocab = _folder(folder, (*_BASE_TOKENS, "<image>"), PALIGEMMA_NAMED,
                                 PALIGEMMA_CHAT_TEMPLATE)
    text = _text_config("gemma2", ids, vocab, "<eos>", num_image_tokens=256,
                        query_pre_attn_scalar=32, sliding_window=4096,
                        final_logit_softcapping=30.0, attn_logit_softcapping=50.0)
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 224,
              "patch_size": 14, "num_image_tokens": 256, "projection_dim": 64,
              "vision_use_head": False}
    config = {"architectures": ["PaliGemmaForConditionalGeneration"], "model_type": "paligemma",
              "image_token_index": ids["<image>"], "hidden_size": 64, "projection_dim": 64,
              "bos_token_id": text["bos_token_id"], "eos_token_id": text["eos_token_id"],
              "pad_token_id": text["pad_token_id"], "text_config": text,
              "vision_config": vision, "torch_dtype": "bfloat16"}
    return _write(folder, config, {"preprocessor_config.json": PALIGEMMA_PREPROCESSOR})


__all__ = ["GEMMA3N_PREPROCESSOR", "GEMMA3_PREPROCESSOR", "GEMMA4_PROCESSOR",
           "PALIGEMMA_PREPROCESSOR", "make_gemma3_folder", "make_gemma3n_folder",
           "make_gemma4_folder", "make_paligemma_folder"]
