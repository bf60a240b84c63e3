"""The caller's floating-point environment does not reach the output.

A thread that set round-upward (fesetround) gets the same pixel values as transformers computes in
the default environment, whether the native pool or the calling thread computes a band, and a
processor first built under that mode (its table, its kernel check, its resize weights) is exact
too. (Flush-to-zero, e.g. torch.set_flush_denormal, goes through the same MXCSR register.)"""

from __future__ import annotations

import ctypes
import platform

import numpy as np
import pytest

import smg_fast

X86 = platform.machine().lower() in ("x86_64", "amd64")
FE_UPWARD = 0x800  # x86-64 glibc
libc = ctypes.CDLL(None)

pytestmark = pytest.mark.skipif(not X86, reason="MXCSR is x86's; aarch64 kernels read tables")


class rounding_upward:
    def __enter__(self) -> None:
        self.old = libc.fegetround()
        assert libc.fesetround(FE_UPWARD) == 0 and libc.fegetround() == FE_UPWARD

    def __exit__(self, *exc) -> None:
        libc.fesetround(self.old)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
@pytest.mark.parametrize("threads", [1, 2])
def test_round_upward_caller_gets_the_reference(chelsea, hf_qwen, hf_run, family, threads):
    want, _ = hf_run(hf_qwen(family), chelsea)
    before = smg_fast.get_num_threads()
    try:
        smg_fast.set_num_threads(threads)
        with rounding_upward():
            fresh = smg_fast.load_processor(family)  # table, kernel check, weights: built now
            got = [fresh(chelsea)["pixel_values"] for _ in range(3)]
    finally:
        smg_fast.set_num_threads(before)
    for g in got:
        assert np.array_equal(g, want)


def test_round_upward_torch_weights_and_kimi(chelsea):
    """Rounding upward changes neither the torchvision backend's weights nor Kimi's normalization.

    Checked against the same calls in the default environment (their references run in the oracle
    venv: test_torchvision_*)."""
    for name, kw in (("qwen2_vl", {"backend": "torchvision"}), ("kimi_k25", {})):
        want = smg_fast.load_processor(name, **kw)(chelsea)["pixel_values"]
        with rounding_upward():
            got = smg_fast.load_processor(name, **kw)(chelsea)["pixel_values"]
        assert np.array_equal(got, want), name
