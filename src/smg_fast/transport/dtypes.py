"""TensorData dtype names and the numpy dtype that holds each one's bytes on the wire.

Shared by the shm/inline reader in :mod:`~smg_fast.transport.tensors` and the RDMA puller."""

from __future__ import annotations

import numpy as np

from .._dtypes import DTYPE_ALIASES
from .errors import TensorError

# TensorData dtype names -> numpy dtype holding the bytes (bfloat16: raw bits in uint16).
TENSOR_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "bfloat16": np.dtype("<u2"),
    "float16": np.dtype("<f2"),
    "float64": np.dtype("<f8"),
    "int64": np.dtype("<i8"),
    "int32": np.dtype("<i4"),
    "int16": np.dtype("<i2"),
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}


def tensor_dtype(name: str) -> tuple[str, np.dtype]:
    """(canonical name, numpy dtype) for a TensorData dtype string (``torch.`` prefix allowed)."""
    key = str(name).removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in TENSOR_DTYPES:
        raise TensorError(f"unsupported tensor dtype {name!r}; known: {sorted(TENSOR_DTYPES)}")
    return key, TENSOR_DTYPES[key]


__all__ = ["TENSOR_DTYPES", "tensor_dtype"]
