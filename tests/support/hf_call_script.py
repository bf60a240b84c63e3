"""smg_fast.hf's classes against transformers' own, in the torchvision oracle venv.

Runs under the venv's python (see tests/support/tv_oracle.py), never under pytest, with
smg_fast on PYTHONPATH (tests/engines/test_hf_classes.py): torchvision and PIL backends, alone
and inside Qwen2VLProcessor with a tiny tokenizer built offline. Prints one JSON object:
{case: true | false | "error text"}.
"""

import base64
import io
import json
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from transformers.models.kimi_k25.image_processing_kimi_k25 import (
    Kimi_K25ImageProcessor as HfKimi,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorPil as HfQwenPil,
)
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor as HfQwen
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

import smg_fast.hf as sh

warnings.simplefilter("ignore")
torch.set_num_threads(1)
SPECIALS = ["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["[UNK]", "describe", "this", "image", *SPECIALS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]",
                                   additional_special_tokens=SPECIALS)


def same(a, b) -> bool:
    if sorted(a.keys()) != sorted(b.keys()):
        return False
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def main(photo: Path) -> None:
    rgb = np.asarray(Image.open(photo).convert("RGB"))[:301, :407]
    png = io.BytesIO()
    Image.fromarray(rgb).save(png, "PNG")
    b64 = base64.b64encode(png.getvalue()).decode()
    tmp = Path(tempfile.mkdtemp())
    (tmp / "x.png").write_bytes(png.getvalue())
    Image.fromarray(rgb).save(tmp / "x.jpg", quality=90)
    rgba = np.dstack([rgb, rgb[:, :, 1]])
    inputs = {
        "numpy_hwc": rgb, "numpy_chw": np.ascontiguousarray(rgb.transpose(2, 0, 1)),
        "torch_hwc": torch.from_numpy(rgb.copy()),
        "torch_chw": torch.from_numpy(rgb.copy()).permute(2, 0, 1),
        "nested": [[rgb], [rgb[:200, :150]]], "batch_4d": np.stack([rgb, rgb]),
        "pil": Image.fromarray(rgb), "gray_hw1": rgb[:, :, :1].copy(), "rgba_numpy": rgba,
        "rgba_pil": Image.fromarray(rgba), "path": str(tmp / "x.png"),
        "jpeg_path": str(tmp / "x.jpg"), "base64": b64,
        "data_url": "data:image/png;base64," + b64,
    }
    options = {"size": {"shortest_edge": 3136, "longest_edge": 40000}, "patch_size": 16,
               "merge_size": 1, "temporal_patch_size": 1, "image_mean": [0.1, 0.2, 0.3],
               "image_std": 0.6, "do_rescale": False, "input_data_format": "channels_last"}
    result: dict = {}

    def run(case, ref, ours, *args, **kwargs):
        """Calls both with the same arguments; records equal, different or the error."""
        try:
            result[case] = same(ref(*args, **kwargs), ours(*args, **kwargs))
        except Exception as exc:  # reported, the test fails on it
            result[case] = f"{type(exc).__name__}: {exc}"[:300]

    for backend, hf_cls, our_cls in (("torchvision", HfQwen, sh.Qwen2VLImageProcessor),
                                     ("pil", HfQwenPil, sh.Qwen2VLImageProcessorPil)):
        ref, ours = hf_cls(), our_cls()
        for name, img in inputs.items():
            run(f"{backend}/{name}", ref, ours, img, return_tensors="pt")
        for key, value in options.items():
            run(f"{backend}/option/{key}", ref, ours, rgb, return_tensors="np", **{key: value})
        run(f"{backend}/float_unit", ref, ours, rgb.astype(np.float32) / 255,
            return_tensors="np", do_rescale=False)
        tok = tiny_tokenizer()
        text = ["describe <|vision_start|><|image_pad|><|vision_end|> image"] * 2
        procs = [Qwen2VLProcessor(image_processor=p, tokenizer=tok,
                                  video_processor=Qwen2VLVideoProcessor()) for p in (ref, ours)]
        run(f"{backend}/Qwen2VLProcessor", procs[0], procs[1], images=[rgb, inputs["pil"]],
            text=text, return_tensors="pt")
    kimi = (HfKimi(), sh.Kimi_K25ImageProcessor())
    run("kimi/torchvision", *kimi, rgb, return_tensors="pt")
    run("kimi/torchvision/nested", *kimi, [[rgb], [rgb[:99]]], return_tensors="pt")
    print(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
