"""smg-fast processors next to their references, one benchmark group per family and input size.

Groups are named like "qwen2_vl-1920x1080".

In every group:
  smg_f32_1t    smg-fast, 1 native thread, float32
  smg_bf16_1t   smg-fast, 1 native thread, bfloat16 (uint16 bits)
  smg_f32_all   smg-fast, all CPUs, float32
  reference     Qwen: transformers' Qwen2VLImageProcessorPil (NumPy, single-threaded);
                Kimi: the upstream NumPy reference in bench/references.py
  torchvision   transformers' torchvision processor, torch.set_num_threads(1) (skipped when
                torchvision is not installed)
  copy_floor    np.copyto of the float32 output's bytes into a preallocated, already touched
                buffer: the memory-speed floor for writing that tensor once

Input: scikit-image's astronaut photo, resized once (LANCZOS) to each size, as an RGB PIL image.

    python -m pytest bench/ --benchmark-only --benchmark-json=/tmp/bench.json -q
    python bench/summarize.py /tmp/bench.json
"""

from __future__ import annotations

import numpy as np


def _pixel_values(out) -> np.ndarray:
    return np.asarray(out["pixel_values"])


def _run_smg(benchmark, case, smg_threads, *, threads: int | None, dtype: str, impl: str):
    actual_threads = smg_threads(threads)
    itemsize = 4 if dtype == "float32" else 2
    case.describe(benchmark, impl, threads=actual_threads, dtype=dtype,
                  nbytes=case.expected.size * itemsize)
    proc, image = case.processor, case.image
    out = benchmark.pedantic(lambda: proc(image, dtype=dtype), rounds=case.fast_rounds,
                             iterations=1, warmup_rounds=1)
    pv = _pixel_values(out)
    assert pv.shape == case.expected.shape
    if dtype == "float32":
        assert np.array_equal(pv, case.expected)


def test_smg_f32_1t(benchmark, case, smg_threads):
    _run_smg(benchmark, case, smg_threads, threads=1, dtype="float32", impl="smg_f32_1t")


def test_smg_bf16_1t(benchmark, case, smg_threads):
    _run_smg(benchmark, case, smg_threads, threads=1, dtype="bfloat16", impl="smg_bf16_1t")


def test_smg_f32_all(benchmark, case, smg_threads):
    _run_smg(benchmark, case, smg_threads, threads=None, dtype="float32", impl="smg_f32_all")


def test_reference(benchmark, case, hf_pil, kimi_reference):
    """The exact reference: transformers' PIL processor (Qwen, Gemma 3) / upstream code (Kimi)."""
    image = case.image
    if case.family != "kimi_k25":
        hf = hf_pil(case.family)
        label = f"transformers {type(hf).__name__}"

        def run():
            return _pixel_values(hf(image, return_tensors="np"))
    else:
        label = "upstream NumPy reference (bench/references.py)"

        def run():
            return kimi_reference(image)

    case.describe(benchmark, "reference", threads=1, dtype="float32",
                  nbytes=case.expected.nbytes, reference=label)
    pv = benchmark.pedantic(run, rounds=case.reference_rounds, iterations=1, warmup_rounds=1)
    # Same tensor as smg-fast, bit for bit: the reference really is configured like the family.
    assert pv.dtype == np.float32 and pv.shape == case.expected.shape
    assert np.array_equal(pv, case.expected), f"{label} differs from smg-fast on {case.group}"


def test_torchvision(benchmark, case, hf_torchvision):
    """transformers' torchvision processor on one torch thread (close to, not equal to, exact)."""
    hf = hf_torchvision(case.family)  # skips without torchvision
    import torch

    image = case.image
    case.describe(benchmark, "torchvision", threads=1, dtype="float32",
                  nbytes=case.expected.nbytes, reference=type(hf).__name__)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = benchmark.pedantic(lambda: hf(image, return_tensors="np"),
                                 rounds=case.reference_rounds, iterations=1, warmup_rounds=1)
    finally:
        torch.set_num_threads(before)
    assert _pixel_values(out).shape == case.expected.shape


def test_copy_floor(benchmark, case):
    """Copying the float32 output's bytes once, into a buffer allocated and touched up front."""
    src = case.expected.reshape(-1).view(np.uint8)
    dst = np.empty_like(src)
    dst[...] = src  # first touch outside the timed region
    case.describe(benchmark, "copy_floor", threads=1, dtype="float32", nbytes=src.nbytes)
    benchmark.pedantic(np.copyto, args=(dst, src), rounds=case.fast_rounds, iterations=1,
                       warmup_rounds=1)
    assert np.array_equal(dst, src)
