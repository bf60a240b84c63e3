"""prepare() + write_into().

The caller-chosen destination (shared memory, RDMA slot) gets exactly what __call__ returns, per
batch and per image."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

import smg_fast


@pytest.mark.parametrize("family", ["qwen2_vl", "kimi_k25"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_write_into_mmap_equals_call(family, dtype, real_images):
    proc = smg_fast.load_processor(family)
    images = [real_images.rgb("astronaut"), real_images.rgb("chelsea")]
    ref = proc(images, dtype=dtype)["pixel_values"]
    batch = proc.prepare(images, dtype=dtype)
    assert batch.nbytes == ref.nbytes and batch.shape == ref.shape
    with mmap.mmap(-1, batch.nbytes) as mm:
        dst = np.frombuffer(mm, dtype=batch.np_dtype)
        out = batch.write_into(dst)
        assert np.array_equal(out, ref)
        del dst, out
    # one image at a time, into separate buffers
    parts = []
    for i in range(len(images)):
        buf = np.empty(int(np.prod(batch.item_shape(i))), dtype=batch.np_dtype)
        parts.append(batch.write_into(buf, index=i))
    assert np.array_equal(np.concatenate(parts), ref)
    assert np.array_equal(batch.grid, proc(images)["image_grid_thw"])


def test_write_into_rejects_wrong_destination(real_images):
    proc = smg_fast.load_processor("qwen2_vl")
    batch = proc.prepare(real_images.rgb("chelsea"))
    with pytest.raises(ValueError):
        batch.write_into(np.empty(batch.nbytes // 4, dtype=np.float16))
    with pytest.raises(ValueError):
        batch.write_into(np.empty(10, dtype=np.float32))
    ro = np.empty(batch.nbytes // 4, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        batch.write_into(ro)


def test_write_into_rejects_non_contiguous(real_images):
    proc = smg_fast.load_processor("qwen2_vl")
    batch = proc.prepare(real_images.rgb("chelsea"))
    n = batch.nbytes // 4
    with pytest.raises(ValueError):
        batch.write_into(np.empty(2 * n, dtype=np.float32)[::2])
