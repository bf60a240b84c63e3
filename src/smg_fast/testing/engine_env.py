"""Running code inside an engine's own virtualenv (vLLM, SGLang) with this smg-fast in it.

The engines pin their own torch and transformers, so they live in venvs of their own that
``.ci/oracle_venv.sh NAME`` makes outside the clone, keyed by the sha256 of ``.ci/venvs/NAME.txt``.
smg-fast enters such a venv as an installed distribution would: an overlay folder on PYTHONPATH
holds the package (a link to the one this process imports) and a ``.dist-info`` whose
``entry_points.txt`` is the one pip wrote for this install, so the engine discovers the plugin
through importlib.metadata exactly as after ``pip install smg-fast``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from .oracle_venv import venv_python

DIST = "smg-fast"


def engine_python(name: str, repo: Path) -> Path:
    """The python of engine name's venv.

    Found from repo's .ci/venvs/name.txt: the pins live in the repository, not in the installed
    package. Raises OracleVenvMissing."""
    return venv_python(repo / ".ci" / "venvs" / f"{name}.txt")


def make_overlay(dest: Path, *, with_native: bool = True) -> Path:
    """An overlay folder with this process's smg_fast and its installed dist-info.

    ``with_native=False`` copies the package without its compiled extension: a process that
    imports smg_fast from it fails at the native import (the plugin's error path).
    """
    import smg_fast

    dest.mkdir(parents=True, exist_ok=True)
    pkg = Path(smg_fast.__file__).resolve().parent
    if with_native:
        (dest / "smg_fast").symlink_to(pkg, target_is_directory=True)
    else:
        shutil.copytree(pkg, dest / "smg_fast",
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    dist = metadata.distribution(DIST)
    info = dest / f"smg_fast-{dist.version}.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\n"
                                         f"Version: {dist.version}\n")
    entry_points = dist.read_text("entry_points.txt")
    if entry_points is None:
        raise RuntimeError(f"the installed {DIST} declares no entry points: reinstall it "
                           "(pip install .) so its plugin entry points are registered")
    info.joinpath("entry_points.txt").write_text(entry_points)
    return dest


def venv_env(overlay: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment for an engine venv: the overlay first on its path, no hub access.

    SMG_FAST_ISA passes through, so a benchmark can run under an instruction-set cap."""
    keep = {k: v for k, v in os.environ.items()
            if k in ("HOME", "PATH", "TMPDIR", "LANG", "LC_ALL", "SMG_FAST_VENV_CACHE",
                     "SMG_FAST_ISA")}
    return {**keep, "PYTHONPATH": str(overlay), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", **(env or {})}


def start_in_venv(python: Path, args: list[str], overlay: Path,
                  env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Starts ``python args`` in the engine venv (stdout and stderr captured as text)."""
    return subprocess.Popen([str(python), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=venv_env(overlay, env))


def run_in_venv(python: Path, args: list[str], overlay: Path, env: dict[str, str] | None = None,
                timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Runs ``python args`` in the engine venv and waits (killed after timeout seconds)."""
    return subprocess.run([str(python), *args], capture_output=True, text=True,
                          timeout=timeout, env=venv_env(overlay, env))
