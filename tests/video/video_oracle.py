"""transformers' video processors as the oracle, run in the torchvision venv.

transformers' video processors need torchvision (the CUDA build of torch: never in the main
environment), so tests/video/video_oracle_script.py runs under the torchvision venv's python,
as the image oracle does (support/tv_oracle.py), with its outputs cached on disk
(support/oracle_cache.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from support.oracle_cache import cached_batch
from support.tv_oracle import PINS, run_script, tv_python

SCRIPT = Path(__file__).with_name("video_oracle_script.py")
KEYS = ("pixel_values", "grid", "indices", "fps")


def run_oracle(workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    """The reference's outputs per job, cached.

    A job: {"cls": "qwen2" | "qwen3", "kwargs": constructor kwargs, "video": encoded bytes
    or a (T, H, W, 3) uint8 array, "call": call options}: the reference's pixel_values (float32),
    grid, sampled frame indices and metadata fps (-1 for none), cached. A job with "samples":
    [(total frames, rate, options), ...] instead runs only ``sample_frames`` on each: the indices
    (concatenated) and their counts ("sizes", -1 where it raised)."""
    python = tv_python()
    shared = (python, PINS.read_bytes(), SCRIPT.read_bytes())
    return cached_batch("torchvision-video", shared, jobs,
                        lambda todo: _run(python, workdir, todo))


def _run(python: str, workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    run_script(python, SCRIPT, workdir, jobs)
    keys = [("indices", "sizes") if "samples" in job else KEYS for job in jobs]
    return [{k: np.load(workdir / f"{i}_{k}.npy") for k in keys[i]} for i in range(len(jobs))]
