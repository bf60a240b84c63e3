"""smg_fast.hf's LLaVA-NeXT and OneVision drop-ins against transformers' classes, in the venv.

Runs under the venv's python with smg_fast on PYTHONPATH (tests/parity/test_llava_torchvision.py),
never under pytest. For each family: AutoImageProcessor after register() on a folder whose
config.json names the model type (torchvision installed: transformers' torchvision class), and
each drop-in's call with return_tensors "pt", "np" and None on a batch of the given image files
with different tile counts. Prints one JSON object: {case: true | false | "error text"}.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.llava_next.image_processing_llava_next import LlavaNextImageProcessor
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)
from transformers.models.llava_onevision.image_processing_llava_onevision import (
    LlavaOnevisionImageProcessor,
)
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
    LlavaOnevisionImageProcessorPil,
)

import smg_fast.hf as sh
from smg_fast.testing.oracles import HUB_LLAVA

torch.set_num_threads(1)
CLASSES = {"llava_next": (LlavaNextImageProcessor, LlavaNextImageProcessorPil),
           "llava_onevision": (LlavaOnevisionImageProcessor, LlavaOnevisionImageProcessorPil)}


def same(a, b) -> bool:
    """Equal values of the same container types (tensors, arrays, lists of them, numbers)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


def sizes(value) -> list:
    """image_sizes as plain [h, w] int lists (transformers gives tuples or torch.Size)."""
    return [list(map(int, s)) for s in value]


def main(paths: list[str]) -> None:
    results = {}
    images = [Image.open(p) for p in paths]
    images.append(images[0].convert("RGB").resize((37, 900)))
    assert {"llava_next", "llava_onevision"} <= set(sh.register())
    for family, (tv_cls, pil_cls) in CLASSES.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "config.json").write_text(json.dumps({"model_type": family}))
            pre = {**HUB_LLAVA[family], "image_processor_type": tv_cls.__name__,
                   "do_convert_rgb": True, "do_normalize": True, "do_rescale": True,
                   "do_resize": True}
            (folder / "preprocessor_config.json").write_text(json.dumps(pre))
            auto = AutoImageProcessor.from_pretrained(folder)
            results[f"{family}/auto_class"] = type(auto) is getattr(sh, tv_cls.__name__)
            pil = getattr(sh, pil_cls.__name__).from_pretrained(folder)
            for ours, theirs in ((auto, tv_cls.from_pretrained(folder)),
                                 (pil, pil_cls.from_pretrained(folder))):
                for rt in ("pt", "np", None):
                    case = f"{type(theirs).__name__}/{rt}"
                    try:
                        got, want = (ours(images, return_tensors=rt),
                                     theirs(images, return_tensors=rt))
                        results[case] = (set(got) == set(want)
                                         and same(got["pixel_values"], want["pixel_values"])
                                         and (rt is None or all(same(got[k], want[k])
                                                                for k in want))
                                         and sizes(got["image_sizes"])
                                         == sizes(want["image_sizes"]))
                    except Exception as exc:  # noqa: BLE001 (reported to the test)
                        results[case] = f"{type(exc).__name__}: {exc}"
                results[f"{type(theirs).__name__}/computed_here"] = ours._reference is None
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
