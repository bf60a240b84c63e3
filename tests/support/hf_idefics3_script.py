"""smg_fast.hf's Idefics3 / SmolVLM drop-ins against transformers' classes, in the oracle venv.

Runs under the venv's python with smg_fast on PYTHONPATH
(tests/parity/test_idefics3_torchvision.py), never under pytest. AutoImageProcessor after
register() on each checkpoint's folder (torchvision installed: transformers' torchvision class),
and each drop-in's call with return_tensors "pt", "np" and None on a nested batch of the given
image files, with rows / cols. Prints one JSON
object: {case: true | false | "error text"}.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.idefics3.image_processing_idefics3 import Idefics3ImageProcessor
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
from transformers.models.smolvlm.image_processing_smolvlm import SmolVLMImageProcessor

import smg_fast.hf as sh
from smg_fast.testing.model_folders_idefics3 import IDEFICS3, SMOLVLM2, make_idefics3_folder

torch.set_num_threads(1)
CLASSES = {IDEFICS3: (Idefics3ImageProcessor, Idefics3ImageProcessorPil, "Idefics3"),
           SMOLVLM2: (SmolVLMImageProcessor, SmolVLMImageProcessorPil, "SmolVLM")}


def same(a, b) -> bool:
    """Equal values of the same container types (a tensor, an array, a list of arrays)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a.dtype == b.dtype and np.array_equal(a, b)


def main(paths: list[str]) -> None:
    results = {}
    photos = [Image.open(p) for p in paths]
    images = [[photos[0]], [photos[1], photos[2].convert("RGB").resize((37, 900))]]
    names = sh.register()
    with tempfile.TemporaryDirectory() as tmp:
        for checkpoint, (tv_cls, pil_cls, prefix) in CLASSES.items():
            folder = make_idefics3_folder(Path(tmp) / prefix, checkpoint)
            auto = AutoImageProcessor.from_pretrained(folder)
            results[f"{prefix}/auto_class"] = (type(auto) is getattr(sh, tv_cls.__name__)
                                               and prefix.lower() in names)
            for ours, theirs in ((auto, tv_cls.from_pretrained(folder)),
                                 (getattr(sh, pil_cls.__name__).from_pretrained(folder),
                                  pil_cls.from_pretrained(folder))):
                for rt in ("pt", "np", None):
                    case = f"{type(theirs).__name__}/{rt}"
                    try:
                        got = ours(images, return_tensors=rt, return_row_col_info=True)
                        want = theirs(images, return_tensors=rt, return_row_col_info=True)
                        results[case] = (set(got) == set(want)
                                         and same(got["pixel_values"], want["pixel_values"])
                                         and same(got["pixel_attention_mask"],
                                                  want["pixel_attention_mask"])
                                         and got["rows"] == want["rows"]
                                         and got["cols"] == want["cols"])
                    except Exception as exc:  # noqa: BLE001 (reported to the test)
                        results[case] = f"{type(exc).__name__}: {exc}"
                results[f"{type(theirs).__name__}/computed_here"] = ours._reference is None
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
