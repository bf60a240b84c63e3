"""smg-fast: HF-exact, fast image preprocessing for vision-language models.

    import smg_fast
    proc = smg_fast.load_processor("qwen2_vl")          # or a HF model folder
    out = proc(images, dtype="bfloat16")                # PIL / numpy / bytes / paths
    out["pixel_values"], out["image_grid_thw"], out["num_tokens"]
"""

from __future__ import annotations

from typing import Any

try:
    from . import _native
except ImportError as _exc:  # name the cause: engines log this when loading the plug-in
    raise ImportError(f"smg-fast's native module smg_fast._native does not load ({_exc}): "
                      "reinstall smg-fast for this Python and platform") from _exc
from ._native_version import __version__  # noqa: F401  (first: a stale build fails here)
from .compact import CompactTensor, expand
from .errors import CompactFormatError, InvalidImageError, OutputTooLargeError
from .imaging.pillow_blocks import use_single_block_images
from .processors import FAMILIES, Processor, ProcessorOutput, load_processor
from .processors.config import ProcessorConfig
from .processors.families import KimiK25Processor, QwenVLProcessor
from .resample import pillow_pass_order, resize


def set_num_threads(n: int | None) -> None:
    """Threads the native core may use for one image; None = all CPUs this process may use.

    The environment variable SMG_FAST_NUM_THREADS sets the initial value (default: all CPUs).
    """
    if n is None:
        _native.set_num_threads(0)
        return
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads expects an int or None, got {type(n).__name__}")
    if not 1 <= n <= 1024:
        raise ValueError(f"number of threads must be 1..1024, got {n}")
    _native.set_num_threads(n)


def get_num_threads() -> int:
    return int(_native.num_threads())


def scratch_stats() -> dict[str, Any]:
    """Buffer-pool counters of the native scratch pools.

    hits, misses, gives, drops, remote_gives (blocks given back to their owner's pool from
    another thread), pooled_bytes (all threads), live_bytes, cap_bytes (per thread,
    SMG_FAST_SCRATCH_MB), total_cap_bytes (process, SMG_FAST_SCRATCH_TOTAL_MB) and
    thread_pooled_bytes (the calling thread's pool)."""
    return dict(_native.scratch_stats())


def release_scratch() -> None:
    """Frees the buffers pooled by the calling thread."""
    _native.scratch_release()


__all__ = [
    "FAMILIES",
    "CompactFormatError",
    "CompactTensor",
    "InvalidImageError",
    "KimiK25Processor",
    "OutputTooLargeError",
    "Processor",
    "ProcessorConfig",
    "ProcessorOutput",
    "QwenVLProcessor",
    "cpu_features",
    "expand",
    "get_num_threads",
    "kernel_info",
    "load_processor",
    "pillow_pass_order",
    "release_scratch",
    "resize",
    "scratch_stats",
    "set_num_threads",
    "use_single_block_images",
]


def cpu_features() -> dict[str, bool]:
    """Instruction sets the hand-written kernels use (after the SMG_FAST_ISA cap)."""
    return dict(_native.cpu_features())


def kernel_info() -> dict[str, Any]:
    """Which hand-written kernels this process uses: the proof that a fast (or capped) path ran.

    Keys: ``isa_cap`` (the SMG_FAST_ISA cap in force: avx512, avx512-novnni, avx2 or baseline;
    an unknown value means baseline), ``isa_cap_env`` (the variable as set, or None), ``host``
    (what the CPU supports, ignoring the cap), ``selected`` (per stage, the kernel the dispatch
    picks for RGB/RGBX input), ``ran`` (per stage, the kernels that have run in this process,
    lowest first), ``kernels`` (every kernel compiled in, with its stage, name, ``arch``: x86,
    arm64 or any for portable C++, the lowest cap that admits it, ``min_cap``, and ``ran``) and
    ``tuning`` (``enabled``: SMG_FAST_TUNE is not "0", ``env``: the variable as set, ``choices``:
    per input class the patchify stage timed, its ``stage``, ``key``, chosen ``kernel`` and
    ``median_us`` per candidate; ``selected`` is the fixed order's pick, which tuning may beat).
    Stages: resample.vertical, resample.horizontal (1- and 2-channel images always use its scalar
    kernel), patchify (its SIMD kernel is used only where it reproduces the lookup table's
    values, and for patches up to 16 pixels), expand (:func:`expand` of the compact format on
    the CPU).
    """
    info = dict(_native.kernel_info())
    ran: dict[str, list[str]] = {}
    for k in info["kernels"]:
        ran.setdefault(k["stage"], [])
        if k["ran"]:
            ran[k["stage"]].append(k["name"])
    info["ran"] = ran
    return info
