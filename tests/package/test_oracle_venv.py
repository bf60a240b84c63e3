"""smg_fast.testing.oracle_venv finds the reference venv that .ci/oracle_venv.sh makes.

It looks where the script makes it, and finds it only once it is ready."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from smg_fast.testing.oracle_venv import (
    OracleVenvMissing,
    torchvision_python,
    venv_dir,
    venv_python,
)

REPO = Path(__file__).resolve().parents[2]


def test_venv_dir_is_the_scripts(monkeypatch, tmp_path):
    """The same name as the script's `$cache/$name-$(sha256sum pins | cut -c1-12)`."""
    monkeypatch.setenv("SMG_FAST_VENV_CACHE", str(tmp_path))
    pins = REPO / ".ci" / "venvs" / "torchvision.txt"
    digest = subprocess.run(["sha256sum", str(pins)], capture_output=True, text=True,
                            check=True).stdout[:12]
    assert venv_dir(pins) == tmp_path / f"torchvision-{digest}"


def test_only_a_ready_venv_counts(monkeypatch, tmp_path):
    monkeypatch.setenv("SMG_FAST_VENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SMG_FAST_TV_PYTHON", raising=False)
    pins = tmp_path / "demo.txt"
    pins.write_text("numpy==2.4.6\n")
    venv = venv_dir(pins)
    assert venv.name.startswith("demo-") and venv.parent == tmp_path / "cache"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.symlink_to(os.path.realpath(sys.executable))
    with pytest.raises(OracleVenvMissing, match="oracle_venv.sh demo"):
        venv_python(pins)  # half made: no marker yet
    (venv / ".smg-ready").touch()
    assert venv_python(pins) == python
    pins.write_text("numpy==2.4.7\n")  # another pin: another venv, not made yet
    with pytest.raises(OracleVenvMissing):
        venv_python(pins)


def test_override(monkeypatch, tmp_path):
    monkeypatch.setenv("SMG_FAST_VENV_CACHE", str(tmp_path))
    monkeypatch.setenv("SMG_FAST_TV_PYTHON", sys.executable)
    assert torchvision_python(REPO) == sys.executable
    monkeypatch.setenv("SMG_FAST_TV_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(OracleVenvMissing, match="SMG_FAST_TV_PYTHON"):
        torchvision_python(REPO)
    monkeypatch.delenv("SMG_FAST_TV_PYTHON")
    with pytest.raises(OracleVenvMissing, match="oracle_venv.sh torchvision"):
        torchvision_python(REPO)  # nothing made under this cache
