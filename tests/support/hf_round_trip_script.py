"""Every smg_fast.hf class built with no arguments and round-tripped, against transformers' own.

Importable (tests/engines/test_hf_round_trips.py runs the PIL classes in the main environment)
and runnable under the torchvision oracle venv's python with smg_fast on PYTHONPATH (then it
prints one JSON object). For each class whose default backend is the one asked: transformers'
class and ours built with no arguments, then rebuilt from to_dict (ours from ours, ours from
theirs, theirs from ours) and from save_pretrained folders (both ways); every output of every
instance must equal (np.array_equal) what transformers' no-argument instance returns for the
image. A case is true, or a text saying what differed.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
import warnings
from typing import Any

import numpy as np

import smg_fast.hf as sh
from smg_fast.processors.reference import quiet_transformers_import
from smg_fast.processors.registry import get_family


def _theirs(cls: Any) -> Any:
    """transformers' class that cls replaces."""
    module, _, name = get_family(cls.family).reference.classes[cls.default_backend].partition(":")
    return getattr(importlib.import_module(module), name)


def _arrays(out: Any) -> dict[str, np.ndarray]:
    arrays = {}
    for key, value in out.items():
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()
        arrays[key] = np.asarray(value)
    return arrays


def _differs(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> str:
    if set(expected) != set(got):
        return f"outputs {sorted(got)} vs {sorted(expected)}"
    bad = [k for k in expected if expected[k].shape != got[k].shape or
           not np.array_equal(expected[k], got[k])]
    return f"{bad} differ" if bad else ""


def run(backend: str, image: np.ndarray) -> dict[str, Any]:
    """{class/step: true | what differed} for every smg_fast.hf class of backend."""
    warnings.simplefilter("ignore")
    quiet_transformers_import()
    rt = "np" if backend == "pil" else "pt"
    results: dict[str, Any] = {}
    for name in sh.__all__:
        cls = getattr(sh, name)
        if name == "register" or cls.default_backend != backend:
            continue
        theirs_cls = _theirs(cls)
        theirs = theirs_cls()
        expected = _arrays(theirs(image, return_tensors=rt))
        with tempfile.TemporaryDirectory() as ours_dir, \
                tempfile.TemporaryDirectory() as theirs_dir:
            steps = {
                "no_arguments": cls,
                "from_dict(ours)": lambda cls=cls: cls.from_dict(cls().to_dict()),
                "from_dict(theirs)": lambda cls=cls, t=theirs: cls.from_dict(t.to_dict()),
                "theirs.from_dict(ours)": lambda cls=cls, t=theirs_cls: t.from_dict(
                    cls().to_dict()),
                "from_pretrained(ours)": lambda cls=cls, d=ours_dir: (
                    cls().save_pretrained(d), cls.from_pretrained(d))[1],
                "from_pretrained(theirs)": lambda cls=cls, t=theirs, d=theirs_dir: (
                    t.save_pretrained(d), cls.from_pretrained(d))[1],
                "theirs.from_pretrained(ours)": lambda t=theirs_cls, d=ours_dir: (
                    t.from_pretrained(d)),
            }
            for step, build in steps.items():
                try:
                    proc = build()
                    why = _differs(expected, _arrays(proc(image, return_tensors=rt)))
                    if not why and not step.startswith("theirs.") and \
                            not isinstance(proc, cls):
                        why = f"built {type(proc).__name__}, not {name}"
                except Exception as exc:  # noqa: BLE001 (the exception is the result)
                    why = f"{type(exc).__name__}: {exc}"
                results[f"{name}/{step}"] = why[:300] or True
    return results


if __name__ == "__main__":
    from PIL import Image

    with Image.open(sys.argv[2]) as im:
        rgb = np.ascontiguousarray(np.asarray(im.convert("RGB"))[:233, :301])
    print(json.dumps(run(sys.argv[1], rgb)))
