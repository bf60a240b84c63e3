"""TensorData's encodings: "" (the payload is the tensor) and "uint8+lut" (the compact format).

A "uint8+lut" TensorData is an ordinary uint8 tensor on any payload kind (inline, shm, remote)
plus a ``LutTable`` (dtype, 3 x 256 table, channel run): :mod:`smg_fast.compact` says what it
stands for. The reader checks the table before the payload is touched and hands back a
:class:`~smg_fast.compact.CompactTensor` (or, with ``expand``, the tensor itself)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compact import ENCODING, TABLE_DTYPES, CompactTensor
from .dtypes import TENSOR_DTYPES
from .errors import TensorError


@dataclass(frozen=True)
class LutFields:
    """A checked "uint8+lut" table: the expanded dtype, its 3 x 256 NumPy table, the run."""

    dtype: str
    table: np.ndarray
    run: int


def read_encoding(tensor_data: Any) -> LutFields | None:
    """The encoding of a TensorData: None for a plain one, LutFields for "uint8+lut".

    TensorError for an encoding this reader does not know, or a malformed table (wrong dtype,
    size or run for the shape), so that codes are never read as the tensor they encode."""
    encoding = str(getattr(tensor_data, "encoding", "") or "")
    if not encoding:
        return None
    if encoding != ENCODING:
        raise TensorError(f"unknown TensorData encoding {encoding!r}: this reader knows "
                          f"{ENCODING!r}")
    if tensor_data.dtype != "uint8":
        raise TensorError(f"a {ENCODING!r} tensor carries uint8 codes, not {tensor_data.dtype!r}")
    lut = tensor_data.lut
    if lut.dtype not in TABLE_DTYPES:
        raise TensorError(f"{ENCODING!r} table dtype must be one of {TABLE_DTYPES}, got "
                          f"{lut.dtype!r}")
    np_dtype = TENSOR_DTYPES[lut.dtype]
    if len(lut.table) != 3 * 256 * np_dtype.itemsize:
        raise TensorError(f"{ENCODING!r} table holds {len(lut.table)} bytes, 3 x 256 "
                          f"{lut.dtype} need {3 * 256 * np_dtype.itemsize}")
    count = math.prod(int(s) for s in tensor_data.shape)
    run = int(lut.run)
    if run < 1 or count % (3 * run):
        raise TensorError(f"{ENCODING!r} run {run} does not divide shape "
                          f"{list(tensor_data.shape)} into runs of 3 channels")
    table = np.frombuffer(lut.table, dtype=np_dtype).reshape(3, 256)
    return LutFields(lut.dtype, table, run)


def set_encoding(tensor_data: Any, dtype: str, table: np.ndarray, run: int) -> None:
    """Marks a uint8 TensorData as "uint8+lut" with the 3 x 256 table of dtype."""
    tensor_data.encoding = ENCODING
    tensor_data.lut.dtype = dtype
    tensor_data.lut.table = np.ascontiguousarray(table).astype(TENSOR_DTYPES[dtype],
                                                               copy=False).tobytes()
    tensor_data.lut.run = int(run)


def decoded(codes: Any, fields: LutFields, as_torch: bool, expand: bool) -> Any:
    """The CompactTensor of codes read from the payload (expanded when ``expand``)."""
    table: Any = fields.table
    if as_torch:
        from .._dtypes import to_torch

        table = to_torch(table.copy(), fields.dtype)
    compact = CompactTensor(codes, table, fields.dtype, fields.run)
    return compact.expand() if expand else compact


__all__ = ["LutFields", "decoded", "read_encoding", "set_encoding"]
