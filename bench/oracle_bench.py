"""What the oracle-venv benches share: re-running in the torchvision venv, timing, the CPU's name.

transformers' torchvision classes need torchvision, which lives only in the oracle venv
(.ci/oracle_venv.sh torchvision, or SMG_FAST_TV_PYTHON): a bench re-runs itself under that venv's
python with ``--photo``, importing the smg_fast this environment has through a folder holding only
that package."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _cpu_family_model() -> str:
    """" (family F model M)" from /proc/cpuinfo, or "" where it has none."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("cpu family", "model") and key.strip() not in fields:
                    fields[key.strip()] = value.strip()
                if not line.strip():
                    break  # the first processor's block
    except OSError:
        return ""
    if len(fields) < 2:
        return ""
    return f" (family {fields['cpu family']} model {fields['model']})"


def cpu_model() -> str:
    """lscpu's model name (or the platform's processor), with /proc/cpuinfo's family and model."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        import platform

        return (platform.processor() or "unknown") + _cpu_family_model()
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip() + _cpu_family_model()
    return "unknown" + _cpu_family_model()


def rerun_in_oracle_venv(script: str, args: list[str]) -> int:
    """Runs script in the oracle venv with ``--photo`` (the bench photo) and args; its exit code."""
    from references import photo_file

    import smg_fast
    from smg_fast.testing.oracle_venv import OracleVenvMissing, torchvision_python

    try:
        tv_python = torchvision_python(REPO)
    except OracleVenvMissing as exc:
        raise SystemExit(str(exc)) from None
    with tempfile.TemporaryDirectory() as only:
        # The venv sees this smg_fast and nothing else of this environment (its numpy differs).
        Path(only, "smg_fast").symlink_to(Path(smg_fast.__file__).resolve().parent)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([only, str(Path(script).parent)]))
        return subprocess.call([tv_python, script, "--photo", str(photo_file()), *args], env=env)


def timed(label: str, proc: Any, reference: Any, image: Any, rounds: int,
          dtypes: tuple[str, ...] = ("float32", "bfloat16"),
          output: str = "pixel_values") -> tuple[dict[str, float], dict[str, float]]:
    """gate.measure_against's ratios for label, and the medians in ms of ref, copy and smg."""
    from gate import measure_against

    raw: dict[str, list[float]] = {}
    ratios = measure_against(label, proc, reference, image, rounds, raw, dtypes, output)
    ms = {name: 1e3 * statistics.median(raw[f"{label} {name}"])
          for name in ("ref", "copy", *dtypes)}
    return ratios, ms
