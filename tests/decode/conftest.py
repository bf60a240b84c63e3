"""Fixtures of the decode tests: the native thread count, and the libjpeg check.

The thread count is set by the test and restored after it; the native decoder must have bound
the libjpeg Pillow loaded.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def threads():
    """set(n): the native thread count for this test (restored afterwards)."""
    import smg_fast

    before = smg_fast.get_num_threads()
    yield smg_fast.set_num_threads
    smg_fast.set_num_threads(before)


@pytest.fixture(params=[1, 2], ids=["1t", "2t"])
def thread_count(request, threads) -> int:
    """The test runs on one native thread, then on two."""
    threads(request.param)
    return request.param


@pytest.fixture(scope="module")
def libjpeg_bound() -> None:
    """The native JPEG decoder drives the libjpeg Pillow loaded (built with jpeglib.h)."""
    from smg_fast.imaging import decoders

    assert decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG, (
        "the native core was built without jpeglib.h: run .ci/test_tools.sh, then pip install .")
