"""Where the reference virtualenvs live.

The path .ci/oracle_venv.sh makes for a pin file, found the same way by the tests and the
benchmarks.

A venv for ``.ci/venvs/NAME.txt`` lives at ``$SMG_FAST_VENV_CACHE/NAME-<first 12 hex digits of
the sha256 of the pin file>`` (default cache ``~/.cache/smg-fast/venvs``), and counts as ready
only once its ``.smg-ready`` marker exists (the script writes it last).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

READY_MARKER = ".smg-ready"
TV_PYTHON_ENV = "SMG_FAST_TV_PYTHON"


class OracleVenvMissing(RuntimeError):
    """The reference venv is not made yet (the message names the command that makes it)."""


def venv_cache() -> Path:
    """The directory holding the reference venvs."""
    return Path(os.environ.get("SMG_FAST_VENV_CACHE") or Path.home() / ".cache/smg-fast/venvs")


def venv_dir(pins: Path) -> Path:
    """The venv directory .ci/oracle_venv.sh makes for the pin file pins."""
    digest = hashlib.sha256(Path(pins).read_bytes()).hexdigest()[:12]
    return venv_cache() / f"{Path(pins).stem}-{digest}"


def venv_python(pins: Path) -> Path:
    """The python of pins' venv; raises OracleVenvMissing unless it is ready."""
    venv = venv_dir(pins)
    py = venv / "bin" / "python"
    if not (venv / READY_MARKER).is_file() or not os.access(py, os.X_OK):
        raise OracleVenvMissing(f"the {Path(pins).stem} reference venv is not ready ({venv}): "
                                f"run .ci/oracle_venv.sh {Path(pins).stem}")
    return py


def torchvision_python(repo: Path) -> str:
    """The torchvision oracle's python.

    SMG_FAST_TV_PYTHON when set, else the ready venv of repo's .ci/venvs/torchvision.txt; raises
    OracleVenvMissing."""
    override = os.environ.get(TV_PYTHON_ENV)
    if override:
        if not os.access(override, os.X_OK):
            raise OracleVenvMissing(f"{TV_PYTHON_ENV}={override} is not an executable python")
        return override
    return str(venv_python(Path(repo) / ".ci" / "venvs" / "torchvision.txt"))
