"""A request's delivery format: the plain dtype, or the compact "uint8+lut" encoding.

For "uint8+lut" the server computes (and caches) the uint8 patches, which every transport moves
as a uint8 tensor, and stamps each item's TensorData with the dtype's 3 x 256 table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compact import parse_encoding
from ..processors import Processor
from ..transport.encoding import set_encoding


@dataclass(frozen=True)
class Compact:
    """The table a compact response carries: its dtype, 3 x 256 values and channel run."""

    dtype: str
    table: np.ndarray
    run: int

    def stamp(self, tensor_data: Any) -> None:
        """Marks a delivered uint8 TensorData as this table's "uint8+lut" encoding."""
        set_encoding(tensor_data, self.dtype, self.table, self.run)


def select(encoding: str, dtype: str, proc: Processor) -> tuple[str, Compact | None]:
    """(dtype to compute, Compact or None) for a request's encoding and dtype.

    ValueError for an unknown encoding, CompactFormatError for a processor whose output the
    compact format does not carry exactly."""
    if not parse_encoding(encoding):
        return dtype, None
    return "uint8", Compact(dtype, proc.compact_table(dtype), proc.channel_run())


__all__ = ["Compact", "select"]
