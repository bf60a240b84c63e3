"""Runs mistral_common_script.py (mistral_common, OpenCV without IPP) in the vLLM venv."""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

SCRIPT = Path(__file__).with_name("mistral_common_script.py")


def run_mistral_common(python: Path, workdir: Path, jobs: list[dict[str, Any]]) -> list[Any]:
    """Per job (see the script): the output array, or (image, tokens) for an encode job."""
    (workdir / "jobs.pkl").write_bytes(pickle.dumps(jobs))
    run = subprocess.run([str(python), str(SCRIPT), str(workdir)], capture_output=True,
                         text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    outs: list[Any] = []
    for i, job in enumerate(jobs):
        out = np.load(workdir / f"{i}_out.npy")
        outs.append((out, np.load(workdir / f"{i}_tokens.npy")) if "encode" in job else out)
    return outs


__all__ = ["SCRIPT", "run_mistral_common"]
