"""A batch's images decode on the native thread count's worth of threads.

Same results as one thread, the first bad image's error (by index) whatever finishes first, nothing
left open."""

from __future__ import annotations

import io

import numpy as np
import pytest

import smg_fast
from smg_fast.errors import InvalidImageError


def _encoded(real_images) -> list[bytes]:
    out = []
    for name, fmt in [("rocket", "JPEG"), ("chelsea", "PNG"), ("china", "WEBP"),
                      ("flower", "JPEG"), ("coffee", "GIF"), ("camera", "PNG")]:
        b = io.BytesIO()
        real_images.open(name).save(b, fmt)
        out.append(b.getvalue())
    return out


def test_same_results_on_one_and_two_threads(real_images, threads):
    images = _encoded(real_images)
    proc = smg_fast.load_processor("qwen2_vl")
    threads(1)
    one = proc(images)
    threads(2)
    two = proc(images)
    assert np.array_equal(one.pixel_values, two.pixel_values)
    assert np.array_equal(one.image_grid_thw, two.image_grid_thw)
    singles = np.concatenate([proc(im).pixel_values for im in images])
    assert np.array_equal(two.pixel_values, singles)


def test_first_bad_image_is_the_error(real_images, threads):
    images = _encoded(real_images)
    good = images[0]
    truncated = good[: len(good) // 3]  # decodes fail only after the header was read
    batch = [good, good, good, truncated, good, truncated]
    threads(2)
    proc = smg_fast.load_processor("qwen2_vl")
    for _ in range(5):
        with pytest.raises(InvalidImageError) as info:
            proc(batch)
        assert info.value.index == 3


def test_paths_are_closed_after_a_failed_batch(real_images, threads, tmp_path):
    import os

    paths = []
    for i, data in enumerate(_encoded(real_images)):
        p = tmp_path / f"img{i}"
        p.write_bytes(data if i != 2 else data[: len(data) // 4])
        paths.append(str(p))
    threads(2)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(InvalidImageError):
        smg_fast.load_processor("qwen2_vl")(paths)
    assert len(os.listdir("/proc/self/fd")) == fds


def test_the_pool_outlives_batches_of_other_sizes(real_images, threads):
    """Its threads (and the decode buffers they keep warm) are made once per thread count."""
    from smg_fast.processors import decode_pool

    images = _encoded(real_images)
    threads(2)
    proc = smg_fast.load_processor("qwen2_vl")
    proc(images[:2])
    pool = decode_pool._pool
    for n in (3, 2, 5, 4):
        proc(images[:n])
        assert decode_pool._pool is pool


def test_a_forked_child_gets_its_own_pool(real_images, threads):
    """A forked child decodes on a pool of its own, not on the parent's threads.

    The decode pool's threads do not survive fork: a child's batch waiting on them would hang
    forever, so the child resets the pool.
    """
    import os
    import signal

    images = _encoded(real_images)[:2]
    proc = smg_fast.load_processor("qwen2_vl")
    threads(2)
    want = proc(images).pixel_values  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(30)  # a hang ends the child (SIGALRM), never the suite
            code = 0 if np.array_equal(proc(images).pixel_values, want) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
