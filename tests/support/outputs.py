"""Checks of a processor's outputs against its reference's, shared by the parity and numerics
tests."""

from __future__ import annotations

import numpy as np


def check_outputs(out, ref_pv, ref_grid, merge=2, assert_equal=None) -> None:
    """A processor's outputs against the reference's: float32 pixel_values (compared by
    assert_equal), int64 image_grid_thw, and the token counts the grid implies."""
    pv = np.asarray(out["pixel_values"])
    grid = np.asarray(out["image_grid_thw"])
    assert grid.dtype == np.int64, grid.dtype
    assert grid.tolist() == ref_grid.tolist(), f"grid {grid.tolist()} != {ref_grid.tolist()}"
    assert pv.dtype == np.float32, pv.dtype
    assert_equal(pv, ref_pv)
    tokens = [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1).tolist()]
    assert tokens == [int(t * h * w) // (merge * merge) for t, h, w in ref_grid.tolist()]
