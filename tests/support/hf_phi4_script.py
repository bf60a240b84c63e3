"""smg_fast.hf's Phi-4-multimodal drop-in against transformers' class, in the oracle venv.

Runs under the venv's python with smg_fast on PYTHONPATH
(tests/parity/test_phi4_multimodal_torchvision.py), never under pytest. AutoImageProcessor after
register() on a folder whose config.json names phi4_multimodal, and the drop-in's call with
return_tensors "pt", "np" and None on a batch of the given image files with different crop
counts (and with neither rescale nor normalize), against Phi4MultimodalImageProcessor. Prints
one JSON object: {case: true | false | "error text"}.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoImageProcessor
from transformers.models.phi4_multimodal.image_processing_phi4_multimodal import (
    Phi4MultimodalImageProcessor,
)

import smg_fast.hf as sh

torch.set_num_threads(1)


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


def main(paths: list[str]) -> None:
    results = {}
    images = [Image.open(p) for p in paths]
    images.append(images[0].convert("RGB").resize((3000, 400)))
    assert "phi4_multimodal" in sh.register()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.json").write_text(json.dumps({"model_type": "phi4_multimodal"}))
        pre = {"dynamic_hd": 36, "image_processor_type": "Phi4MultimodalImageProcessor",
               "processor_class": "Phi4MultimodalProcessor"}
        (folder / "preprocessor_config.json").write_text(json.dumps(pre))
        ours = AutoImageProcessor.from_pretrained(folder)
        theirs = Phi4MultimodalImageProcessor.from_pretrained(folder)
        results["auto_class"] = type(ours) is sh.Phi4MultimodalImageProcessor
        for rt in ("pt", "np", None):
            case = f"Phi4MultimodalImageProcessor/{rt}"
            try:
                got, want = ours(images, return_tensors=rt), theirs(images, return_tensors=rt)
                bad = [k for k in want if k not in got or not same(got[k], want[k])]
                results[case] = (set(got) == set(want) and not bad) or f"differ: {bad}, " \
                    f"keys {sorted(got)} vs {sorted(want)}, types " \
                    f"{[(type(got.get(k)).__name__, type(want[k]).__name__) for k in bad]}"
            except Exception as exc:  # reported, not raised: every case is listed
                results[case] = f"{type(exc).__name__}: {exc}"
        # Neither rescaled nor normalized: transformers' uint8 canvas and uint8 global image.
        flags = {"do_rescale": False, "do_normalize": False}
        got = ours(images, return_tensors="pt", **flags)
        want = theirs(images, return_tensors="pt", **flags)
        results["uint8"] = want["image_pixel_values"].dtype == torch.uint8 and all(
            same(got[k], want[k]) for k in want)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
