"""Thread count never changes results, and scratch buffers are reused across calls."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PIL import Image


@pytest.fixture
def restore_threads(smg):
    before = smg.get_num_threads()
    yield
    smg.set_num_threads(before)
    assert smg.get_num_threads() == before


@pytest.fixture(scope="module")
def big_photo(real_images):
    """A real photo upscaled to 2000x1500 (big enough for the work to be split in bands)."""
    return real_images.rgb("rocket").resize((2000, 1500), Image.Resampling.BICUBIC)


def test_set_get_num_threads(smg, restore_threads):
    for n in (1, 2, 4):
        smg.set_num_threads(n)
        assert smg.get_num_threads() == n


def test_bad_thread_count(smg, restore_threads):
    with pytest.raises((ValueError, TypeError)):
        smg.set_num_threads(0)
    with pytest.raises((ValueError, TypeError)):
        smg.set_num_threads(-3)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl", "kimi_k25"])
def test_processor_identical_across_thread_counts(family, big_photo, ours, smg, restore_threads):
    proc = ours(family)
    results = {}
    for n in (1, 4, 3):
        smg.set_num_threads(n)
        out = proc(big_photo.copy(), return_tensors="np")
        results[n] = (np.asarray(out["pixel_values"]).copy(), np.asarray(out["image_grid_thw"]))
    for n in (4, 3):
        assert np.array_equal(results[1][0], results[n][0]), f"{family}: 1 vs {n} threads differ"
        assert np.array_equal(results[1][1], results[n][1])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_dtypes_identical_across_thread_counts(dtype, big_photo, ours, smg, restore_threads):
    proc = ours("qwen2_vl")
    smg.set_num_threads(1)
    one = np.asarray(
        proc(big_photo.copy(), return_tensors="np", dtype=dtype)["pixel_values"]
    ).copy()
    smg.set_num_threads(4)
    four = np.asarray(proc(big_photo.copy(), return_tensors="np", dtype=dtype)["pixel_values"])
    assert np.array_equal(one, four)


def test_resize_identical_across_thread_counts(big_photo, smg, restore_threads):
    arr = np.asarray(big_photo)
    cases = [
        ((1932, 1092), Image.Resampling.BICUBIC),
        ((644, 476), Image.Resampling.BICUBIC),
        ((2011, 1507), Image.Resampling.LANCZOS),
    ]
    for size, f in cases:
        ref = np.asarray(big_photo.resize(size, f))
        for n in (1, 4):
            smg.set_num_threads(n)
            out = smg.resize(arr, size, resample=f)
            assert np.array_equal(out, ref), f"{size} {f.name} with {n} threads"


def test_concurrent_python_threads(big_photo, real_images, ours, smg, restore_threads):
    """Calls from several Python threads at once (GIL released) give the serial results."""
    smg.set_num_threads(2)
    proc = ours("qwen2_vl")
    inputs = [
        big_photo,
        real_images.open("chelsea"),
        real_images.open("camera"),
        real_images.open("logo"),
    ]
    expected = [
        np.asarray(proc(im.copy(), return_tensors="np")["pixel_values"]).copy() for im in inputs
    ]
    errors: list[str] = []

    def worker(i):
        for _ in range(2):
            got = np.asarray(proc(inputs[i].copy(), return_tensors="np")["pixel_values"])
            if not np.array_equal(got, expected[i]):
                errors.append(f"input {i} differs under concurrency")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def test_scratch_pools_reused(real_images, ours, smg, restore_threads):
    smg.set_num_threads(1)  # one native thread: every buffer comes from this thread's pool
    proc = ours("qwen2_vl")
    image = real_images.open("grace_hopper")
    proc(image.copy(), return_tensors="np")  # warm: sizes seen once
    before = smg.scratch_stats()
    for _ in range(3):
        proc(image.copy(), return_tensors="np")
    after = smg.scratch_stats()
    # the same sizes again: every buffer comes from the pool, none is allocated anew
    assert after["hits"] > before["hits"] and after["misses"] == before["misses"], (before, after)


def test_pooled_outputs_are_not_recycled(real_images, ours):
    """Outputs handed to the caller are never reused for later results.

    They stay intact while later calls of the same size run, and writing into an output does not
    leak into later results."""
    proc = ours("qwen2_vl")
    a, b = real_images.rgb("china"), real_images.rgb("flower")  # both 640x427
    ref_a = np.asarray(proc(a, return_tensors="np")["pixel_values"]).copy()
    kept = proc(a, return_tensors="np")
    kept_slice = np.asarray(proc(a, return_tensors="np")["pixel_values"])[:7]
    for _ in range(3):
        proc(b, return_tensors="np")
    assert np.array_equal(np.asarray(kept["pixel_values"]), ref_a)
    assert np.array_equal(kept_slice, ref_a[:7])

    scribble = proc(a, return_tensors="np")
    pv = np.asarray(scribble["pixel_values"])
    assert pv.flags.writeable  # a caller's own array, as transformers returns
    pv[:] = 0
    again = np.asarray(proc(a, return_tensors="np")["pixel_values"])
    assert np.array_equal(again, ref_a)


def test_pooled_torch_outputs_are_not_recycled(real_images, ours):
    torch = pytest.importorskip("torch")
    proc = ours("kimi_k25")
    a, b = real_images.rgb("china"), real_images.rgb("flower")
    ref = np.asarray(proc(a, return_tensors="np")["pixel_values"]).copy()
    kept = proc(a, return_tensors="pt", dtype="bfloat16")["pixel_values"]
    for _ in range(3):
        proc(b, return_tensors="pt", dtype="bfloat16")
    assert torch.equal(kept, torch.from_numpy(ref).to(torch.bfloat16))
