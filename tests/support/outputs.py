"""Checks of a processor's outputs against its reference's, for the parity and numerics tests."""

from __future__ import annotations

import numpy as np


def check_outputs(out, ref_pv, ref_grid, merge=2, assert_equal=None) -> None:
    """A processor's outputs equal the reference's.

    float32 pixel_values (compared by assert_equal), int64 image_grid_thw, and the token counts the
    grid implies.
    """
    pv = np.asarray(out["pixel_values"])
    grid = np.asarray(out["image_grid_thw"])
    assert grid.dtype == np.int64, grid.dtype
    assert grid.tolist() == ref_grid.tolist(), f"grid {grid.tolist()} != {ref_grid.tolist()}"
    assert pv.dtype == np.float32, pv.dtype
    assert_equal(pv, ref_pv)
    tokens = [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1).tolist()]
    assert tokens == [int(t * h * w) // (merge * merge) for t, h, w in ref_grid.tolist()]


def assert_arrays_equal(ours, ref, what: str = "pixel_values") -> None:
    """np.array_equal with a diagnostic message (shape, dtype, count and size of differences)."""
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != reference {ref.shape}"
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != reference {ref.dtype}"
    if np.array_equal(ours, ref):
        return
    diff = ours != ref
    idx = np.argwhere(diff)[0].tolist()
    if np.issubdtype(ours.dtype, np.floating) or np.issubdtype(ours.dtype, np.integer):
        mx = np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()
    else:
        mx = "n/a"
    raise AssertionError(
        f"{what}: {int(diff.sum())} of {diff.size} values differ (max abs diff {mx}); "
        f"first at {idx}: ours={ours[tuple(idx)]!r} reference={ref[tuple(idx)]!r}"
    )
