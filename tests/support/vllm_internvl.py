"""Runs vLLM's own InternVL image path (vllm_internvl_script.py) in the vLLM venv."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

SCRIPT = Path(__file__).with_name("vllm_internvl_script.py")


def run_vllm_internvl(python: Path, workdir: Path,
                      jobs: list[dict[str, Any]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per job ({"image", "min", "max"}): vLLM's (pixel_values_flat, image_num_patches)."""
    (workdir / "jobs.pkl").write_bytes(pickle.dumps(jobs))
    run = subprocess.run([str(python), str(SCRIPT), str(workdir)], capture_output=True,
                         text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    return [(np.load(workdir / f"{i}_pixel_values.npy"), np.load(workdir / f"{i}_num_patches.npy"))
            for i in range(len(jobs))]


__all__ = ["SCRIPT", "run_vllm_internvl"]
