"""Pipeline.run(slot=, slots=): one frame written into its places in a temporal group's patch rows.

The oracle is NumPy over the plain run: the frame's (rows, 3, P * P) patch rows placed at
``[:, :, slot, :]`` of a (rows, 3, slots, P * P) array; every other element must keep what was
there. The video processors' parity tests compare the whole path with transformers."""

from __future__ import annotations

import numpy as np
import pytest

import smg_fast
from smg_fast import _native

DType, Filter, PassOrder = _native.DType, _native.Filter, _native.PassOrder
NP = {DType.FLOAT32: np.float32, DType.BFLOAT16: np.uint16, DType.UINT8: np.uint8}
SENTINEL = {np.float32: np.float32(-7.25), np.uint16: np.uint16(0xBEEF), np.uint8: np.uint8(0xA5)}


def _pipe(dtype: DType, patch: int, merge: int, temporal: int = 1) -> _native.Pipeline:
    return _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                            mean=[0.5, 0.4, 0.3], std=[0.2, 0.3, 0.25], dtype=dtype,
                            filter=Filter.BICUBIC, pass_order=PassOrder.PILLOW13, patch=patch,
                            merge=merge, temporal=temporal)


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(request):
    before = smg_fast.get_num_threads()
    smg_fast.set_num_threads(request.param)
    yield request.param
    smg_fast.set_num_threads(before)


@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.BFLOAT16, DType.UINT8])
@pytest.mark.parametrize("patch,merge,slots,resize,grid", [
    (14, 2, 2, (150, 98), (8, 12)),    # Qwen2-VL's video layout, padding cells past the image
    (16, 2, 2, (64, 64), (4, 4)),      # Qwen3-VL's patch
    (14, 1, 3, (70, 42), (3, 5)),      # three frames a group, no merge
    (4, 2, 2, (37, 29), (8, 10)),      # a small patch, many block rows
])
def test_slot_run_equals_the_plain_run_placed(threads, dtype, patch, merge, slots, resize, grid):
    rng = np.random.default_rng(patch * 31 + slots)
    pipe = _pipe(dtype, patch, merge)
    gh, gw = grid
    rows, cell = gh * gw, patch * patch
    frames = [rng.integers(0, 256, (61 + 7 * s, 83 + 5 * s, 3), dtype=np.uint8)
              for s in range(slots)]
    lead = 11  # elements before the group: the offset is honoured
    out = np.full(lead + rows * 3 * slots * cell + 5, SENTINEL[NP[dtype]], NP[dtype])
    want = out.copy()
    group = want[lead:lead + rows * 3 * slots * cell].reshape(rows, 3, slots, cell)
    for s in (1, 0) if slots == 2 else range(slots):  # any order of slots
        plain = np.empty(rows * 3 * cell, NP[dtype])
        pipe.run(frames[s], *resize, gh, gw, plain)
        group[:, :, s, :] = plain.reshape(rows, 3, cell)
        pipe.run(frames[s], *resize, gh, gw, out, lead, slot=s, slots=slots)
    assert np.array_equal(out, want)


def test_one_slot_leaves_the_others_untouched():
    pipe = _pipe(DType.FLOAT32, 14, 2)
    frame = np.random.default_rng(3).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    out = np.full(4 * 3 * 2 * 196, np.nan, np.float32)
    pipe.run(frame, 28, 28, 2, 2, out, slot=1, slots=2)
    g = out.reshape(4, 3, 2, 196)
    assert np.isnan(g[:, :, 0, :]).all() and not np.isnan(g[:, :, 1, :]).any()


@pytest.mark.parametrize("kwargs,match", [
    ({"slot": 2, "slots": 2}, "slot must lie"),
    ({"slot": -1, "slots": 2}, "slot must lie"),
    ({"slot": 0, "slots": 0}, "slot must lie"),
    ({"slot": 0, "slots": 17}, "slot must lie"),
    ({"slot": 1, "slots": 2, "left": 2}, "no placement"),
])
def test_bad_slots_are_refused(kwargs, match):
    pipe = _pipe(DType.FLOAT32, 14, 2)
    frame = np.zeros((28, 28, 3), np.uint8)
    out = np.zeros(4 * 3 * 17 * 196, np.float32)
    with pytest.raises(ValueError, match=match):
        pipe.run(frame, 26, 26, 2, 2, out, **kwargs)


def test_slots_need_room_for_the_whole_group():
    pipe = _pipe(DType.FLOAT32, 14, 2)
    frame = np.zeros((28, 28, 3), np.uint8)
    out = np.zeros(4 * 3 * 2 * 196 - 1, np.float32)  # one element short of two frames' rows
    with pytest.raises(ValueError, match="dst too small"):
        pipe.run(frame, 28, 28, 2, 2, out, slot=0, slots=2)


def test_slots_need_a_temporal_one_pipeline():
    pipe = _pipe(DType.FLOAT32, 14, 2, temporal=2)
    frame = np.zeros((28, 28, 3), np.uint8)
    out = np.zeros(4 * 3 * 2 * 2 * 196, np.float32)
    with pytest.raises(ValueError, match="temporal size 1"):
        pipe.run(frame, 28, 28, 2, 2, out, slot=0, slots=2)


def test_slots_with_jpeg_are_refused():
    pipe = _pipe(DType.FLOAT32, 14, 2)
    frame = np.zeros((28, 28, 3), np.uint8)
    out = np.zeros(4 * 3 * 2 * 196, np.float32)
    with pytest.raises(ValueError, match="no jpeg"):
        pipe.run(frame, 28, 28, 2, 2, out, slot=1, slots=2, jpeg=b"\xff\xd8",
                 fmt=_native.PixelFormat.RGB)
