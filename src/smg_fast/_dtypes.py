"""Output dtypes: names, native enums, and numpy / torch views of the raw bits."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _native

# name -> (native enum, numpy dtype holding the bits)
DTYPES: dict[str, tuple[_native.DType, np.dtype]] = {
    "float32": (_native.DType.FLOAT32, np.dtype(np.float32)),
    "bfloat16": (_native.DType.BFLOAT16, np.dtype(np.uint16)),  # no numpy bfloat16: raw bits
    "float16": (_native.DType.FLOAT16, np.dtype(np.float16)),
    # the resized bytes in patch order, not rescaled or normalized: what transformers'
    # torchvision processors return for do_rescale=False, do_normalize=False
    "uint8": (_native.DType.UINT8, np.dtype(np.uint8)),
}


# Other spellings of dtype names (torch's, shorthand), for outputs and TensorData alike.
DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
                 "bf16": "bfloat16", "double": "float64", "long": "int64", "int": "int32"}


def parse_dtype(dtype: Any) -> str:
    """Accepts "float32" / "bfloat16" / "float16" / "uint8", numpy dtypes and torch dtypes."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = str(name).removeprefix("torch.")
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}: use 'float32', 'bfloat16', 'float16' "
                         "or 'uint8' (not normalized)")
    return name


def to_torch(array: np.ndarray, dtype_name: str) -> Any:
    """Wraps an output array as a torch tensor without copying (bfloat16 via a bit view)."""
    try:
        import torch
    except ImportError as exc:  # torch is an optional extra
        raise ImportError("return_tensors='pt' needs torch (pip install torch)") from exc
    t = torch.from_numpy(array)
    if dtype_name == "bfloat16":
        t = t.view(torch.bfloat16)
    return t
