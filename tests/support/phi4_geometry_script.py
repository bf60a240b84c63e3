"""Phi-4-multimodal's grids, resize sizes and masks: transformers' method against smg-fast's.

Runs under the oracle venv's python (tests/support/tv_oracle.py run_with_smg_fast): for every
size in a sweep and dynamic_hd in a few values, Phi4MultimodalImageProcessor.dynamic_preprocess
on an uninitialized image of that size, with torchvision's resize and pad replaced by stubs that
record the size asked for and return a tensor of it (no pixels are computed), against
smg_fast's crop_geometry and crop_masks (and that the grid is ceil(resized side / 448), as the
processor reads it back from its grid_thw); the error transformers raises for a resized side under
10 against the ValueError crop_geometry raises. Prints {"checked": n, "bad": [...]} last.
"""

import json
import sys

import numpy as np
import torch
from transformers.models.phi4_multimodal import image_processing_phi4_multimodal as mod

from smg_fast.processors.families.phi4_multimodal import crop_geometry, crop_masks

asked = {}


def fake_resize(image, size, *args, **kwargs):
    """Records the (height, width) asked for; an empty tensor of that size."""
    asked["size"] = tuple(size)
    return torch.empty((3, *size), dtype=torch.uint8)


def fake_pad(image, padding, *args, **kwargs):
    """An empty tensor of the padded size (left, top, right, bottom)."""
    _, h, w = image.shape
    return torch.empty((3, h + padding[1] + padding[3], w + padding[0] + padding[2]),
                       dtype=torch.uint8)


def main() -> None:
    mod.tvF.resize, mod.tvF.pad = fake_resize, fake_pad
    proc = mod.Phi4MultimodalImageProcessor()
    sides = sorted({1, 2, 5, 9, 10, 11, 37, 100, 223, 224, 300, 447, 448, 449, 500, 895, 896,
                    897, 1000, 1080, 1344, 1500, 1920, 2000, 2688, 3000, 4000, 5000, 6000,
                    9999, 20000})
    bad, n = [], 0
    for most in (1, 4, 6, 12, 36, 37):
        for h in sides:
            for w in sides:
                n += 1
                image = torch.empty((3, h, w), dtype=torch.uint8)
                try:
                    out, mask = proc.dynamic_preprocess(image, 448, 14, 32, max_num=most)
                    want = (out.shape[2] // 448, out.shape[1] // 448, asked["size"][1],
                            asked["size"][0], mask.numpy())
                except ValueError:
                    want = "refused"
                try:
                    cols, rows, nw, nh = crop_geometry(w, h, 448, most)
                    masks = crop_masks(cols, rows, nw, nh, 448)[1:]
                    whole = masks.reshape(rows, cols, 32, 32).transpose(0, 2, 1, 3).reshape(
                        rows * 32, cols * 32)
                    got = (cols, rows, nw, nh, whole)
                    # the processor reads the grid back from the resized size (its grid_thw)
                    if (-(-nw // 448), -(-nh // 448)) != (cols, rows):
                        bad.append([h, w, most, "grid not ceil(resized / 448)"])
                except ValueError:
                    got = "refused"
                same = got == want if isinstance(got, str) or isinstance(want, str) else (
                    got[:4] == want[:4] and np.array_equal(got[4], want[4]))
                if not same:
                    bad.append([h, w, most, str(got)[:80], str(want)[:80]])
    print(json.dumps({"checked": n, "bad": bad[:20]}))


if __name__ == "__main__":
    sys.exit(main())
