"""smg_fast.hf's Llama 4 drop-in against transformers' Llama4ImageProcessor, in the venv.

Runs under the venv's python with smg_fast on PYTHONPATH (tests/parity/test_llama4_torchvision.py),
never under pytest. AutoImageProcessor after register() on a folder whose config.json names
llama4 (transformers' class is torchvision only), and the drop-in's call with return_tensors "pt"
and None on a batch of the given image files with different tile counts, against transformers'
class; return_tensors "np", which transformers refuses for bfloat16, gives its bits as uint16.
Prints one JSON object: {case: true | false | "error text"}.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.llama4.image_processing_llama4 import Llama4ImageProcessor

import smg_fast.hf as sh
from smg_fast.testing.oracles import HUB_LLAMA4

torch.set_num_threads(1)


def same(a, b) -> bool:
    """Equal values of the same container types (tensors, lists of them, numbers)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


def main(paths: list[str]) -> None:
    results = {}
    images = [Image.open(p) for p in paths]
    images.append(images[0].convert("RGB").resize((37, 900)))
    assert "llama4" in sh.register()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps({"model_type": "llama4"}))
        pre = {**HUB_LLAMA4, "image_processor_type": "Llama4ImageProcessor",
               "do_normalize": True, "do_rescale": True, "do_resize": True}
        (folder / "preprocessor_config.json").write_text(json.dumps(pre))
        ours = AutoImageProcessor.from_pretrained(folder)
        theirs = Llama4ImageProcessor.from_pretrained(folder)
        results["auto_class"] = type(ours) is sh.Llama4ImageProcessor
        for rt in ("pt", None):
            case = f"Llama4ImageProcessor/{rt}"
            try:
                got, want = ours(images, return_tensors=rt), theirs(images, return_tensors=rt)
                results[case] = (set(got) == set(want)
                                 and same(got["pixel_values"], want["pixel_values"])
                                 and same(got["aspect_ratios"], want["aspect_ratios"]))
            except Exception as exc:  # reported, not raised: every case is listed
                results[case] = f"{type(exc).__name__}: {exc}"
        try:
            theirs(images, return_tensors="np")
            results["np/transformers_refuses"] = False
        except ValueError:
            results["np/transformers_refuses"] = True
        want = theirs(images, return_tensors="pt")
        got = ours(images, return_tensors="np")
        pv = got["pixel_values"]
        results["np/uint16_bits"] = (isinstance(pv, np.ndarray) and pv.dtype == np.uint16
                                     and np.array_equal(pv, want["pixel_values"]
                                                        .view(torch.uint16).numpy())
                                     and np.array_equal(got["aspect_ratios"],
                                                        want["aspect_ratios"].numpy()))
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
