"""Llama 4's canvases and resize sizes: transformers' functions against smg-fast's plan.

Runs under the oracle venv's python (tests/support/tv_oracle.py run_with_smg_fast): for every
size in a sweep and max_patches in a few values, transformers' find_supported_resolutions,
get_best_fit and the resize target of Llama4ImageProcessor._preprocess against
smg_fast.processors.tiles.best_fit_plan. Prints {"checked": n, "bad": [...]} as its last line.
"""

import json
import sys

import torch
from transformers.image_utils import SizeDict
from transformers.models.llama4.image_processing_llama4 import (
    find_supported_resolutions,
    get_best_fit,
    get_max_res_without_distortion,
)

from smg_fast.processors.tiles import best_fit_plan, factor_canvases


def reference(h: int, w: int, tile: int, most: int) -> tuple[int, int, int, int]:
    """(rows, columns, resize height, resize width) as transformers computes them."""
    size = SizeDict(height=tile, width=tile)
    res = torch.tensor(find_supported_resolutions(max_num_chunks=most, patch_size=size))
    th, tw = (int(v) for v in get_best_fit((h, w), res))
    target = (min(max(h, tile), th), min(max(w, tile), tw))
    nh, nw = get_max_res_without_distortion((h, w), target)
    return th // tile, tw // tile, max(nh, 1), max(nw, 1)


def main() -> None:
    sides = sorted({1, 2, 3, 7, 25, 100, 167, 168, 200, 299, 300, 335, 336, 337, 500, 671, 672,
                    673, 900, 1000, 1007, 1008, 1080, 1344, 1500, 1920, 2000, 3000, 4000, 5376,
                    6000, 9999})
    bad, n = [], 0
    for most in (1, 4, 6, 16, 17):
        size = SizeDict(height=336, width=336)
        want = [tuple(v // 336 for v in r) for r in find_supported_resolutions(most, size)]
        if want != list(factor_canvases(most)):
            bad.append(["canvases", most])
        for h in sides:
            for w in sides:
                n += 1
                p = best_fit_plan(w, h, 336, most)
                got = (p.grid_h, p.grid_w, p.resize_h, p.resize_w)
                if got != reference(h, w, 336, most):
                    bad.append([h, w, most, got, reference(h, w, 336, most)])
    print(json.dumps({"checked": n, "bad": bad[:20]}))


if __name__ == "__main__":
    sys.exit(main())
