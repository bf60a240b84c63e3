"""Call options of the wrong type: transformers' classes against smg-fast, one backend.

Importable (tests/parity/test_call_option_types.py runs the PIL classes in the main environment)
and runnable under the torchvision oracle venv's python with smg_fast on PYTHONPATH (then it
prints one JSON object). For every family whose reference is transformers' class on the backend,
each integer option, flag option and ``size`` value is called as an int (both compute: the outputs
must be equal) and as a float, a non-integral float, a str, a bool and a NumPy scalar (transformers
refuses them: smg-fast must raise UnsupportedCallError). A case is true, or a text saying what
differed.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import numpy as np

import smg_fast
from smg_fast.errors import UnsupportedCallError
from smg_fast.processors.reference import (
    quiet_transformers_import,
    reference_class,
    reference_processor,
    reference_return_tensors,
)
from smg_fast.processors.registry import get_family

# options smg-fast refuses (ValueError) whatever their type, where transformers' class computes
REFUSED = {("keye", "size")}


def _odd_ints(value: int) -> dict[str, Any]:
    return {"float": float(value), "fraction": value + 0.7, "str": str(value), "bool": True,
            "numpy_int": np.int64(value), "numpy_float": np.float64(value)}


def _odd_flags(value: bool) -> dict[str, Any]:
    return {"int": int(value), "str": str(value), "numpy_bool": np.bool_(value)}


def _pixels(out: Any) -> np.ndarray:
    """The main output as a NumPy array (bfloat16 as its bits; Phi-4's one image unwrapped)."""
    pv = out["pixel_values"] if "pixel_values" in out else out["image_pixel_values"]
    if str(getattr(pv, "dtype", "")) == "torch.bfloat16":
        import torch

        return pv.view(torch.int16).numpy().view(np.uint16)
    arr = np.asarray(pv)
    return arr[0] if "image_pixel_values" in out and arr.ndim == 5 else arr


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 (the exception is the result)
        return "error", exc


def _options(family: str, ours: Any, ref: Any) -> dict[str, tuple[Any, Any]]:
    """{case name: (value as an int / bool, {name: odd value})} for the family's options."""
    cases: dict[str, tuple[Any, Any]] = {}
    cfg = ours.config
    for key, field in get_family(family).calls.fields.items():
        value = getattr(cfg, field)
        if value is None:
            continue
        odd = _odd_flags(value) if isinstance(value, bool) else _odd_ints(value)
        cases[key] = ({key: value}, {n: {key: v} for n, v in odd.items()})
    size = getattr(ref, "size", None)
    if size is not None:
        size = {k: v for k, v in dict(size).items() if v is not None}
        for k, v in size.items():
            cases[f"size.{k}"] = ({"size": size},
                                  {n: {"size": {**size, k: x}} for n, x in _odd_ints(v).items()})
    return cases


def run(backend: str, image: np.ndarray) -> dict[str, Any]:
    """{family/option/value kind: true | what differed} for every family on backend."""
    warnings.simplefilter("ignore")
    quiet_transformers_import()
    results: dict[str, Any] = {}
    for family in smg_fast.FAMILIES:
        if backend not in get_family(family).backends:
            continue
        ours = smg_fast.load_processor(family, backend=backend)
        cls, _ = reference_class(ours.config)
        if cls is None or not cls.__module__.startswith("transformers."):
            continue
        ref, _ = reference_processor(ours.config)
        rt = reference_return_tensors(ref)
        for option, (good, odd) in _options(family, ours, ref).items():
            kind, theirs = _outcome(ref, image, return_tensors=rt, **good)
            got_kind, got = _outcome(ours, image, **good)
            theirs = _pixels(theirs) if kind == "ok" else theirs
            got = _pixels(got) if got_kind == "ok" else got
            # an option transformers' class does not take at all (Idefics3's patch_size): both
            # refuse it, whatever its type
            offered = kind == "ok"
            ok = kind == got_kind == "ok" and theirs.shape == got.shape and \
                np.array_equal(theirs, got)
            ok = ok or (not offered and isinstance(got, UnsupportedCallError))
            if (family, option.split(".")[0]) in REFUSED:
                ok = isinstance(got, ValueError)
            results[f"{family}/{option}/int"] = True if ok else f"{theirs!r} vs {got!r}"
            for name, kw in odd.items():
                kind, theirs = _outcome(ref, image, return_tensors=rt, **kw)
                got_kind, got = _outcome(ours, image, **kw)
                refused = kind == "error" and (not offered or type(theirs).__name__.startswith(
                    "StrictDataclass"))
                ok = refused and isinstance(got, UnsupportedCallError)
                results[f"{family}/{option}/{name}"] = True if ok else \
                    f"transformers: {theirs!r}; smg-fast: {got!r}"[:300]
    return results


if __name__ == "__main__":
    from PIL import Image

    with Image.open(sys.argv[2]) as im:
        rgb = np.ascontiguousarray(np.asarray(im.convert("RGB"))[:120, :170])
    print(json.dumps(run(sys.argv[1], rgb)))
