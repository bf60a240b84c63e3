"""smg_fast.hf makes the drop-in classes of families registered after it was imported.

Each case runs in a child process: registering a family changes the process-wide registry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import smg_fast

_NEW_FAMILY = textwrap.dedent("""
    import dataclasses, pickle, sys
    import smg_fast.hf as hf
    from smg_fast.processors import get_family, register
    from smg_fast.processors.families import qwen

    base = get_family("qwen2_vl")
    classes = {sys.argv[1]: "torchvision"}
    register(dataclasses.replace(
        base, name="myfam", builtin=dataclasses.replace(base.builtin, family="myfam"),
        model_types=("myfam",), dropin=dataclasses.replace(qwen.DROPIN, classes=classes)))
    try:
        registered = hf.register()
    except ValueError as exc:
        print("refused:", exc)
        raise SystemExit(0)
    cls = getattr(hf, sys.argv[1])
    proc = cls()
    assert pickle.loads(pickle.dumps(proc)).family == proc.family
    print(cls.__name__, proc.family, sys.argv[1] in hf.__all__, "qwen2_vl" in registered,
          hf.Qwen2VLImageProcessor().family)
""")


def _run(class_name: str) -> str:
    here = str(Path(smg_fast.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _NEW_FAMILY, class_name], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_a_family_registered_later_gets_its_class():
    """Its class is made on first use, pickles by name, and register() still serves Qwen."""
    assert _run("MyFamImageProcessor") == "MyFamImageProcessor myfam True True qwen2_vl"


def test_a_class_name_taken_by_another_family_is_refused():
    """A second family's drop-in naming Qwen's class would replace it: it is a ValueError."""
    out = _run("Qwen2VLImageProcessor")
    assert out.startswith("refused:") and "Qwen2VLImageProcessor" in out and "myfam" in out, out
