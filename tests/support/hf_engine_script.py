"""What an engine's environment does with smg_fast.hf.register(), in the oracle venv.

Runs under the venv's python (see tests/support/tv_oracle.py), never under pytest, with
smg_fast on PYTHONPATH (tests/engines/test_hf_engines.py). A local model folder (real Qwen2-VL /
Qwen3-VL hub preprocessor values, a tiny tokenizer built offline) loaded by AutoImageProcessor /
AutoProcessor before and after register(): the classes swap, and every output equals
transformers' own on real images, including the uint8 patches of do_rescale=False,
do_normalize=False (vLLM's default for Qwen2-VL). Prints one JSON object:
{case: true | false | "error text"}.
"""

import copy
import json
import pickle
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoImageProcessor, AutoProcessor, PreTrainedTokenizerFast
from transformers.models.kimi_k25.image_processing_kimi_k25 import (
    Kimi_K25ImageProcessor as HfKimi,
)

import smg_fast.hf as sh

warnings.simplefilter("ignore")
torch.set_num_threads(1)
RAW = {"do_rescale": False, "do_normalize": False}  # vLLM's device-normalize call
SPECIALS = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"]
QWEN2_HUB = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
             "temporal_patch_size": 2, "merge_size": 2,
             "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711],
             "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2VLProcessor"}
QWEN3_HUB = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
             "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3,
             "image_std": [0.5] * 3, "image_processor_type": "Qwen2VLImageProcessorFast",
             "processor_class": "Qwen3VLProcessor"}


def model_folder(root: Path, model_type: str, pre: dict) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": model_type}))
    (root / "preprocessor_config.json").write_text(json.dumps(pre))
    vocab = {w: i for i, w in enumerate(["[UNK]", "describe", "this", "image", *SPECIALS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                            additional_special_tokens=SPECIALS).save_pretrained(root)
    return root


def same(a, b) -> bool:
    if sorted(a.keys()) != sorted(b.keys()):
        return False
    return all(type(a[k]) is type(b[k]) and np.asarray(a[k]).dtype == np.asarray(b[k]).dtype and
               np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def check_model(name, d, refs, case, images, pil, text, tmp) -> None:
    """One model folder's cases, after register()."""
    ref_ip, ref_proc, ref_pil = refs
    ours_ip = AutoImageProcessor.from_pretrained(d)
    ours_proc = AutoProcessor.from_pretrained(d)
    ours_pil = AutoImageProcessor.from_pretrained(d, backend="pil")
    ours_fast = AutoImageProcessor.from_pretrained(d, use_fast=False)
    case(f"{name}/auto_class", lambda: type(ours_ip) is sh.Qwen2VLImageProcessor
         and type(ref_ip).__module__.startswith("transformers."))
    case(f"{name}/auto_pil_class", lambda: type(ours_pil) is sh.Qwen2VLImageProcessorPil
         and type(ours_fast) is sh.Qwen2VLImageProcessorPil)
    case(f"{name}/processor_class",
         lambda: type(ours_proc.image_processor) is sh.Qwen2VLImageProcessor)
    case(f"{name}/repr", lambda: "smg-fast" in repr(ours_proc)
         and "torchvision" in repr(ours_ip))
    for attr in ("patch_size", "merge_size", "temporal_patch_size", "size", "image_mean",
                 "image_std"):
        case(f"{name}/attr/{attr}",
             lambda a=attr: getattr(ours_ip, a) == getattr(ref_ip, a))
    case(f"{name}/number_of_patches", lambda: all(
        ours_ip.get_number_of_image_patches(h, w, {}) ==
        ref_ip.get_number_of_image_patches(h, w, {}) for h, w in [(1080, 1920), (33, 97)]))
    case(f"{name}/processor_call", lambda: same(
        ref_proc(text=[text], images=pil, return_tensors="pt"),
        ours_proc(text=[text], images=pil, return_tensors="pt")))
    for p, im in zip(images, pil, strict=True):
        for kw in ({}, {"do_rescale": False, "do_normalize": False},
                   {"do_rescale": True, "do_normalize": False}):
            tag = "+".join(f"{k}={v}" for k, v in kw.items()) or "default"
            case(f"{name}/{p.name}/torchvision/{tag}", lambda kw=kw, im=im: same(
                ref_ip(im, return_tensors="pt", **kw), ours_ip(im, return_tensors="pt", **kw)))
            case(f"{name}/{p.name}/pil/{tag}", lambda kw=kw, im=im: same(
                ref_pil(im, return_tensors="pt", **kw),
                ours_pil(im, return_tensors="pt", **kw)))
        case(f"{name}/{p.name}/uint8_bytes_path", lambda p=p: same(
            ref_ip(str(p), do_rescale=False, do_normalize=False, return_tensors="pt"),
            ours_ip(str(p), do_rescale=False, do_normalize=False, return_tensors="pt")))
    case(f"{name}/no_return_tensors", lambda: same(ref_ip(pil[:2]), ours_ip(pil[:2]))
         and same(ref_pil(pil[:2]), ours_pil(pil[:2])))
    odd = {**RAW, "patch_size": 10, "merge_size": 1, "temporal_patch_size": 1}
    case(f"{name}/uint8_other_layout", lambda: same(
        ref_ip(pil[0], return_tensors="pt", **odd), ours_ip(pil[0], return_tensors="pt", **odd)))
    case(f"{name}/uint8_dtype", lambda: ours_ip(
        pil[0], do_rescale=False, do_normalize=False,
        return_tensors="pt")["pixel_values"].dtype == torch.uint8)
    clone = pickle.loads(pickle.dumps(ours_ip))
    case(f"{name}/pickle_and_deepcopy", lambda: same(
        clone(pil[0], return_tensors="pt"), ref_ip(pil[0], return_tensors="pt"))
        and same(copy.deepcopy(ours_proc)(text=[text], images=pil, return_tensors="pt"),
                 ref_proc(text=[text], images=pil, return_tensors="pt")))
    saved = tmp / f"saved_{name}"
    ours_proc.save_pretrained(saved)
    case(f"{name}/save_pretrained_round_trip", lambda saved=saved: same(
        type(ref_ip).from_pretrained(saved)(pil[0], return_tensors="pt"),
        ref_ip(pil[0], return_tensors="pt")))


def main(images: list[Path]) -> None:
    tmp = Path(tempfile.mkdtemp())
    folders = {"qwen2_vl": model_folder(tmp / "q2", "qwen2_vl", QWEN2_HUB),
               "qwen3_vl": model_folder(tmp / "q3", "qwen3_vl", QWEN3_HUB)}
    pil = [Image.open(p) for p in images]
    for im in pil:
        im.load()
    text = "describe " + " ".join(["<|vision_start|><|image_pad|><|vision_end|>"] * len(pil))
    refs = {name: (AutoImageProcessor.from_pretrained(d), AutoProcessor.from_pretrained(d),
                   AutoImageProcessor.from_pretrained(d, backend="pil"))
            for name, d in folders.items()}
    first = sh.register()
    result: dict = {"register_idempotent": sh.register() == first and "qwen3_vl" in first}

    def case(name, fn):
        try:
            result[name] = bool(fn())
        except Exception as exc:  # reported, the test fails on it
            result[name] = f"{type(exc).__name__}: {exc}"[:400]

    for name, d in folders.items():
        check_model(name, d, refs[name], case, images, pil, text, tmp)
    kimi_ref, kimi_ours = HfKimi(), sh.Kimi_K25ImageProcessor()
    for p, im in zip(images, pil, strict=True):  # zero padding right and bottom, in uint8
        case(f"kimi/{p.name}/uint8", lambda im=im: same(
            kimi_ref(im, return_tensors="pt", **RAW), kimi_ours(im, return_tensors="pt", **RAW)))
    print(json.dumps(result))


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
