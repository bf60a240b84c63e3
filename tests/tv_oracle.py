"""transformers' torchvision image processors as an oracle, run in their own virtualenv.

torchvision needs the CUDA build of torch, which the main environment must not have, so the
reference outputs come from tests/tv_oracle_script.py under the python of the venv that
.ci/oracle_venv.sh torchvision makes outside the clone (smg_fast.testing.oracle_venv finds it;
SMG_FAST_TV_PYTHON overrides). Inputs travel as a pickle (PIL images keep their mode, palette and
info), outputs as .npy files. Without the venv the tests fail with a message naming the script;
they never skip.
"""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracle_cache import cached_batch

from smg_fast.testing.oracle_venv import OracleVenvMissing, torchvision_python

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).with_name("tv_oracle_script.py")
PINS = REPO / ".ci" / "venvs" / "torchvision.txt"

# Kimi-K2.5's media_proc_cfg as Kimi_K25ImageProcessor takes it.
KIMI_HUB = dict(size={"max_height": 512, "max_width": 512}, max_patches=16384, patch_size=14,
                merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)


def tv_python() -> str:
    """The oracle venv's python; fails the test (never skips) when the venv is not made."""
    try:
        return torchvision_python(REPO)
    except OracleVenvMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def run_oracle(workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    """Runs jobs in the oracle venv (or reads their cached outputs: tests/oracle_cache.py). A
    job: {"cls": "qwen" | "kimi", "kwargs": constructor kwargs, "images": [PIL image or numpy
    array, ...]}. Returns per job {"pixel_values" (float32), "bf16" (uint16 bits of
    pixel_values.to(torch.bfloat16)), "grid"}; a job with "convert": True runs only the
    processor's convert_to_rgb on its one (H, W, C) uint8 array and returns {"rgb": (H, W, 3)}."""
    python = tv_python()
    # The venv (its pins and where it is) and the script that drives it are part of every key.
    shared = (python, PINS.read_bytes(), SCRIPT.read_bytes())
    return cached_batch("torchvision", shared, jobs, lambda todo: _run(python, workdir, todo))


def _run(python: str, workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "jobs.pkl", "wb") as fh:
        pickle.dump(jobs, fh)
    proc = subprocess.run([python, str(SCRIPT), str(workdir)], capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"torchvision oracle failed:\n{proc.stderr[-4000:]}", pytrace=False)
    keys = ("pixel_values", "bf16", "grid")
    return [{"rgb": np.load(workdir / f"{i}_rgb.npy")} if job.get("convert") else
            {k: np.load(workdir / f"{i}_{k}.npy") for k in keys} for i, job in enumerate(jobs)]
