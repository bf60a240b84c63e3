"""smg_fast.hf's Pixtral drop-ins against transformers' classes, in the oracle venv.

Runs under the venv's python with smg_fast on PYTHONPATH (tests/parity/test_pixtral_torchvision.py),
never under pytest. AutoImageProcessor after register() on a llava + PixtralImageProcessor folder
(torchvision installed: transformers' PixtralImageProcessor), and each drop-in's call with
return_tensors "pt", "np" and None on a mixed-size batch of the given image files. Prints one
JSON object: {case: true | false | "error text"}.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil
from transformers.models.pixtral.image_processing_pixtral import PixtralImageProcessor

import smg_fast.hf as sh

torch.set_num_threads(1)
HUB = {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
       "image_mean": [0.48145466, 0.4578275, 0.40821073],
       "image_processor_type": "PixtralImageProcessor",
       "image_std": [0.26862954, 0.26130258, 0.27577711],
       "patch_size": {"height": 16, "width": 16}, "processor_class": "PixtralProcessor",
       "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"longest_edge": 1024}}


def same(a, b) -> bool:
    """Equal values of the same container types (a tensor, an array, a list of pairs)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(list(x) == list(y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a.dtype == b.dtype and np.array_equal(a, b)


def main(paths: list[str]) -> None:
    results = {}
    images = [Image.open(p) for p in paths]
    images.append(images[0].convert("RGB").resize((37, 900)))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps({"model_type": "llava"}))
        (folder / "preprocessor_config.json").write_text(json.dumps(HUB))
        assert "pixtral" in sh.register()
        auto = AutoImageProcessor.from_pretrained(folder)
        results["auto_class"] = type(auto) is sh.PixtralImageProcessor
        for ours, theirs in ((auto, PixtralImageProcessor.from_pretrained(folder)),
                             (sh.PixtralImageProcessorPil.from_pretrained(folder),
                              PixtralImageProcessorPil.from_pretrained(folder))):
            for rt in ("pt", "np", None):
                case = f"{type(theirs).__name__}/{rt}"
                try:
                    got, want = ours(images, return_tensors=rt), theirs(images, return_tensors=rt)
                    results[case] = (set(got) == set(want)
                                     and same(got["pixel_values"], want["pixel_values"])
                                     and (rt is None or same(got["image_sizes"],
                                                             want["image_sizes"]))
                                     and [list(map(int, s)) for s in got["image_sizes"]]
                                     == [list(map(int, s)) for s in want["image_sizes"]])
                except Exception as exc:  # noqa: BLE001 (reported to the test)
                    results[case] = f"{type(exc).__name__}: {exc}"
            results[f"{type(theirs).__name__}/computed_here"] = ours._reference is None
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
