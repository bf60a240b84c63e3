"""What a RemoteTensorHandle says.

Parsing and checking a handle (or the TensorData carrying it) against its descriptor, and casting a
pulled payload to what the caller asked for."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._dtypes import to_torch
from ..dtypes import tensor_dtype
from .descriptor import TRANSPORT, Descriptor
from .errors import DescriptorError, ForeignHandleError


def parse_remote(tensor: Any) -> tuple[Descriptor, tuple[int, ...], str, np.dtype]:
    """Parses the descriptor, shape and dtypes of a remote payload.

    Returns (descriptor, shape, dtype name, numpy dtype) of a TensorData with a remote payload or of
    a bare RemoteTensorHandle (flat uint8); DescriptorError when they are malformed or disagree."""
    if hasattr(tensor, "WhichOneof") and hasattr(tensor, "shape"):  # TensorData
        if tensor.WhichOneof("payload") != "remote":
            raise DescriptorError("TensorData has no remote payload")
        name, np_dtype = tensor_dtype(tensor.dtype)
        handle = tensor.remote
        shape = tuple(int(s) for s in tensor.shape)
    else:  # a bare RemoteTensorHandle: flat bytes
        handle, name, np_dtype = tensor, "uint8", np.dtype(np.uint8)
        shape = (int(handle.nbytes),)
    if handle.transport != TRANSPORT:
        raise ForeignHandleError(str(handle.transport), TRANSPORT)
    desc = Descriptor.decode(bytes(handle.descriptor))
    need = math.prod(shape) * np_dtype.itemsize
    if desc.nbytes != int(handle.nbytes) or desc.nbytes != need:
        raise DescriptorError(f"handle says {handle.nbytes} bytes, descriptor {desc.nbytes}, "
                              f"shape {list(shape)} {name} needs {need}")
    return desc, shape, name, np_dtype


def cast_result(arr: np.ndarray, dtype_name: str, cast: Any, as_torch: bool) -> Any:
    if as_torch or not isinstance(cast, str):
        import torch

        t = to_torch(arr, dtype_name)
        target = getattr(torch, str(cast).removeprefix("torch.")) if isinstance(cast, str) else cast
        out = t.to(target, copy=True)
        return out if as_torch else out.numpy()
    if dtype_name == "bfloat16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.dtype(cast), copy=True)


__all__ = ["cast_result", "parse_remote"]
