"""InternVL's candidate grids: listed without a scan of every pair, bounded before listing.

InternVL's original code (vLLM's get_internvl_target_ratios) fills a set for n = min..max with
every pair of sides up to n: O(max ** 3) steps, which a hostile ``max_patches`` (a config, a call
option, an attribute read by get_number_of_image_patches) would turn into minutes or more before
any check. smg-fast lists the same grids in the same order in O(max log max) steps
(set_order_candidates against vLLM's function in the vLLM venv; candidates against transformers'
get_all_supported_aspect_ratios) and refuses more than MAX_TILES (1024) tiles with ValueError
before listing anything. Published configs use far fewer: transformers' GotOcr2 classes default
to 1..12, and InternVL configs' max_dynamic_patch values are 6 to 24.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.engine_common import engine_python_or_fail
from transformers.models.got_ocr2 import image_processing_pil_got_ocr2 as got

import smg_fast
import smg_fast.hf as hf
from smg_fast.errors import UnsupportedCallError
from smg_fast.processors.tiles import MAX_TILES, candidates, set_order_candidates

SCRIPT = Path(__file__).parents[1] / "support" / "internvl_ratios_script.py"
BOUNDS = [(lo, hi) for lo in (-1, 0, 1, 2, 3, 7, 12) for hi in (0, 1, 2, 5, 6, 12, 13, 24, 40)]
BOUNDS += [(1, 100), (30, 100), (1, 257), (1, 512), (300, 512)]


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


def test_set_order_is_vllm_original_order(vllm_python):
    run = subprocess.run([str(vllm_python), str(SCRIPT), json.dumps(BOUNDS)],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(theirs) == len(BOUNDS)
    for lo, hi in BOUNDS:
        assert [list(g) for g in set_order_candidates(lo, hi)] == theirs[f"{lo},{hi}"], (lo, hi)
    assert set_order_candidates(1, 12) != candidates(1, 12)  # the orders do differ


@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
def test_candidates_are_transformers(bounds):
    assert list(candidates(*bounds)) == got.get_all_supported_aspect_ratios(*bounds)


def test_the_bound_itself_is_listed():
    grids = set_order_candidates(1, MAX_TILES)
    assert sorted(grids) == sorted(candidates(1, MAX_TILES))
    assert len(grids) == sum(MAX_TILES // c for c in range(1, MAX_TILES + 1))


@pytest.mark.parametrize("most", [MAX_TILES + 1, 10**6, 10**12])
def test_a_hostile_bound_is_refused_before_listing(most):
    for listing in (candidates, set_order_candidates):
        with pytest.raises(ValueError, match=f"at most {MAX_TILES}"):
            listing(1, most)
    for backend in ("pil", "upstream"):
        with pytest.raises(ValueError, match="max_patches must be at most"):
            smg_fast.load_processor("internvl", backend=backend, max_patches=most)
    image = np.zeros((40, 60, 3), np.uint8)
    with pytest.raises(UnsupportedCallError):  # the call option: refused before any image
        smg_fast.load_processor("internvl", backend="upstream")(image, max_patches=most)
    dropin = hf.GotOcr2ImageProcessorPil(crop_to_patches=True)
    with pytest.raises(ValueError, match=f"at most {MAX_TILES}"):
        dropin.get_number_of_image_patches(40, 60, {"max_patches": most})
    dropin.max_patches = most  # an attribute, read by the count as transformers reads it
    with pytest.raises(ValueError, match=f"at most {MAX_TILES}"):
        dropin.get_number_of_image_patches(40, 60, {})


@pytest.mark.parametrize("bad", [12.0, "12", True])
def test_a_bound_that_is_not_an_int_is_refused(bad):
    for listing in (candidates, set_order_candidates):
        with pytest.raises(ValueError, match="must be an int"):
            listing(1, bad)
