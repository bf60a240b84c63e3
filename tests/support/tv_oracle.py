"""transformers' torchvision image processors as an oracle, run in their own virtualenv.

torchvision needs the CUDA build of torch, which the main environment must not have, so the
reference outputs come from tests/support/tv_oracle_script.py under the python of the venv that
.ci/oracle_venv.sh torchvision makes outside the clone (smg_fast.testing.oracle_venv finds it;
SMG_FAST_TV_PYTHON overrides). Inputs travel as a pickle (PIL images keep their mode, palette and
info), outputs as .npy files. Without the venv the tests fail with a message naming the script;
they never skip.
"""

from __future__ import annotations

import pickle
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smg_fast.testing.oracle_venv import OracleVenvMissing, torchvision_python
from smg_fast.testing.oracles import kimi_kwargs
from support.oracle_cache import cached_batch

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("tv_oracle_script.py")
PINS = REPO / ".ci" / "venvs" / "torchvision.txt"
KIMI_VL_ORACLE = SCRIPT.with_name("kimi_vl_upstream.py")  # the script imports it

KIMI_HUB = kimi_kwargs()  # Kimi-K2.5's media_proc_cfg as Kimi_K25ImageProcessor takes it


def tv_python() -> str:
    """The oracle venv's python; fails the test (never skips) when the venv is not made."""
    try:
        return torchvision_python(REPO)
    except OracleVenvMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def run_with_smg_fast(script: Path, args: list[str], workdir: Path) -> Any:
    """script run by the oracle venv's python with smg_fast importable; its last line, as JSON.

    The venv imports the smg_fast this process imported (installed by pip in CI, or built in
    place) through workdir, a folder holding only that package: putting its parent on
    PYTHONPATH would shadow the venv's own numpy with the main environment's.
    """
    import json
    import os

    import smg_fast

    (workdir / "smg_fast").symlink_to(Path(smg_fast.__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=str(workdir))
    proc = subprocess.run([tv_python(), str(script), *args], capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_oracle(workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    """Runs jobs in the oracle venv, or reads their cached outputs (support/oracle_cache.py).

    A job: {"cls": "qwen" | "kimi", "kwargs": constructor kwargs, "images": [PIL image or numpy
    array, ...]}. Returns per job {"pixel_values" (float32), "bf16" (uint16 bits of
    pixel_values.to(torch.bfloat16)), "grid"}; a job with "convert": True runs only the processor's
    convert_to_rgb on its one (H, W, C) uint8 array and returns {"rgb": (H, W, 3)}.
    """
    python = tv_python()
    # The venv (its pins and where it is) and the script that drives it are part of every key.
    shared = (python, PINS.read_bytes(), SCRIPT.read_bytes(), KIMI_VL_ORACLE.read_bytes())
    return cached_batch("torchvision", shared, jobs, lambda todo: _run(python, workdir, todo))


def run_script(python: str, script: Path, workdir: Path, jobs: list[dict[str, Any]]) -> None:
    """script run by python on jobs (pickled into workdir); fails the test when it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "jobs.pkl", "wb") as fh:
        pickle.dump(jobs, fh)
    proc = subprocess.run([python, str(script), str(workdir)], capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"{script.name} failed in the oracle venv:\n{proc.stderr[-4000:]}",
                    pytrace=False)


def _run(python: str, workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    workdir.mkdir(parents=True, exist_ok=True)
    # a folder of this call's own (no file of an earlier call read as this one's), deleted once
    # read: a whole run's outputs would otherwise stay on disk (GBs; the cache keeps them)
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    try:
        return _read(python, run_dir, jobs)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _read(python: str, workdir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, np.ndarray]]:
    run_script(python, SCRIPT, workdir, jobs)
    keys = ("pixel_values", "bf16", "grid")
    out = [{"rgb": np.load(workdir / f"{i}_rgb.npy")} if job.get("convert") else
           {k: np.load(workdir / f"{i}_{k}.npy") for k in keys} for i, job in enumerate(jobs)]
    for i, got in enumerate(out):  # Idefics3's [rows, cols] (nested lists) as a JSON string
        path = workdir / f"{i}_rowcol.json"
        if path.exists():
            got["rowcol"] = np.array(path.read_text())
        for extra in ("mask", "tokens"):  # Phi-4's image_attention_mask and num_img_tokens
            if (workdir / f"{i}_{extra}.npy").exists():
                got[extra] = np.load(workdir / f"{i}_{extra}.npy")
    return out
