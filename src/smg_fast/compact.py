"""The compact exact format: resized uint8 pixels in patch order plus a table per channel.

Every float output smg-fast computes is ``table[channel][u]`` for the resized uint8 pixel ``u`` at
that position (the pipeline builds the 3 x 256 table in the reference's operation order and writes
each value from it), so the uint8 patches and the table reproduce it bit for bit, in a quarter of
float32's bytes (half of bfloat16's). In the patch layout, elements come in runs of ``run`` (the
temporal copies times the patch area) of one channel, channels 0, 1, 2 in turn: element ``i``
belongs to channel ``(i // run) % 3``.

:func:`expand` turns a :class:`CompactTensor` back into the float32 / bfloat16 / float16 array or
torch tensor the full path returns: natively for NumPy and CPU torch, as a gather on the tensor's
device for CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from ._dtypes import DTYPES, to_torch

ENCODING = "uint8+lut"  # the delivery format's name (TensorData.encoding, encoding= options)
ENCODINGS = ("", ENCODING)  # "": the plain array of the dtype
TABLE_DTYPES = ("float32", "bfloat16", "float16")  # what a table may hold


def parse_encoding(encoding: Any) -> str:
    """"" (plain) or ENCODING; ValueError for anything else."""
    name = "" if encoding is None else encoding
    if name not in ENCODINGS:
        raise ValueError(f"unsupported encoding {encoding!r}: use {ENCODING!r} or None")
    return name


@dataclass(frozen=True)
class CompactTensor:
    """A float output as uint8 codes in the patch layout and a 3 x 256 table (``expand()`` it).

    ``codes``: uint8, shaped like the full output (NumPy array or torch tensor). ``lut``: 3 x 256
    values of ``dtype`` (NumPy: float32, float16, or uint16 holding bfloat16 bits; torch: the
    dtype itself). ``run``: elements per channel run (see the module docstring)."""

    codes: Any
    lut: Any
    dtype: str
    run: int

    def __post_init__(self) -> None:
        if self.dtype not in TABLE_DTYPES:
            raise ValueError(f"compact dtype must be one of {TABLE_DTYPES}, got {self.dtype!r}")
        n = int(np.prod(tuple(self.codes.shape)))
        if self.run < 1 or n % (3 * self.run):
            raise ValueError(f"compact tensor of {n} elements does not hold runs of {self.run} "
                             "per channel for 3 channels")
        if tuple(self.lut.shape) != (3, 256):
            raise ValueError(f"compact table must be 3 x 256, got {tuple(self.lut.shape)}")

    @property
    def shape(self) -> tuple[int, ...]:
        """The expanded tensor's shape (the codes')."""
        return tuple(int(s) for s in self.codes.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of codes and table together (what travels)."""
        itemsize = 4 if self.dtype == "float32" else 2
        return int(np.prod(self.shape)) + 3 * 256 * itemsize

    def expand(self, out: Any = None) -> Any:
        """:func:`expand` of this tensor."""
        return expand(self, out=out)


def lut_array(pipeline_lut: np.ndarray, dtype: str) -> np.ndarray:
    """A pipeline's 3 x 256 table as the CompactTensor's NumPy lut (a read-only view)."""
    want = DTYPES[dtype][1]
    if pipeline_lut.dtype != want or pipeline_lut.shape != (3, 256):
        raise ValueError(f"a {dtype} table must be 3 x 256 {want}, got {pipeline_lut.shape} "
                         f"{pipeline_lut.dtype}")
    return pipeline_lut


def expand(compact: CompactTensor, out: Any = None) -> Any:
    """The float array or tensor ``compact`` encodes: ``lut[(i // run) % 3, codes[i]]``.

    NumPy codes give a NumPy array (bfloat16 as uint16 bits, as the full path returns it); torch
    codes a torch tensor of the dtype on the codes' device (CPU natively, other devices by a
    gather there). ``out``: an optional C-contiguous destination of the result's type, dtype and
    size. Identical, bit for bit, to what the full path returns for the same call."""
    codes = compact.codes
    if type(codes).__module__.startswith("torch"):
        return _expand_torch(compact, out)
    return _expand_numpy(np.asarray(codes), np.asarray(compact.lut), compact, out)


def _expand_numpy(codes: np.ndarray, lut: np.ndarray, compact: CompactTensor,
                  out: np.ndarray | None) -> np.ndarray:
    np_dtype = DTYPES[compact.dtype][1]
    if codes.dtype != np.uint8:
        raise ValueError(f"compact codes must be uint8, got {codes.dtype}")
    lut = np.ascontiguousarray(lut)
    if lut.dtype.itemsize != np_dtype.itemsize:
        raise ValueError(f"a {compact.dtype} table has {np_dtype.itemsize}-byte entries, got "
                         f"{lut.dtype}")
    if out is None:  # pooled, as the full path's outputs are: reused pages are not faulted again
        out = _native.pooled_empty(codes.size * np_dtype.itemsize, huge_pages=False).view(np_dtype)
    elif out.dtype != np_dtype or out.size != codes.size or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {np_dtype} array of {codes.size} elements")
    _native.expand_lut(np.ascontiguousarray(codes), lut.view(np_dtype), compact.run, out)
    return out.reshape(codes.shape)


def _expand_torch(compact: CompactTensor, out: Any) -> Any:
    import torch

    codes = compact.codes
    if codes.dtype != torch.uint8:
        raise ValueError(f"compact codes must be torch.uint8, got {codes.dtype}")
    want = to_torch(np.empty(0, DTYPES[compact.dtype][1]), compact.dtype).dtype
    lut = compact.lut
    if not isinstance(lut, torch.Tensor):
        lut = to_torch(np.ascontiguousarray(lut), compact.dtype)
    if lut.dtype != want:
        raise ValueError(f"a {compact.dtype} table must be {want}, got {lut.dtype}")
    if out is not None and (out.dtype != want or out.numel() != codes.numel()
                            or out.device != codes.device or not out.is_contiguous()):
        raise ValueError(f"out must be a contiguous {want} tensor of {codes.numel()} elements "
                         f"on {codes.device}")
    if out is not None and out.requires_grad:  # written outside autograd, as torch's out= refuses
        raise ValueError("out must not require grad: expand writes it outside autograd")
    if codes.device.type == "cpu":
        np_dtype = DTYPES[compact.dtype][1]
        dst = torch.empty(codes.shape, dtype=want) if out is None else out
        bits = torch.int16 if want.itemsize == 2 else torch.int32
        _native.expand_lut(codes.contiguous().numpy(), lut.contiguous().view(bits).numpy(),
                           compact.run, dst.view(bits).numpy().view(np_dtype))
        return dst.reshape(codes.shape)
    flat = gather(codes, lut, compact.run)
    if out is None:
        return flat.view(codes.shape)
    out.view(-1).copy_(flat)
    return out.view(codes.shape)


def gather(codes: Any, lut: Any, run: int) -> Any:
    """The device form of the expansion: one gather of the flat table, on the codes' device.

    Index ``256 * channel + code`` into the 768 values; returns a flat tensor. What expand runs
    for CUDA (and any non-CPU) tensors; it computes the same on CPU tensors."""
    import torch

    table = lut.to(codes.device).reshape(-1)
    index = codes.contiguous().view(-1, 3, run).to(torch.int32)
    index += torch.arange(0, 768, 256, dtype=torch.int32, device=codes.device).view(1, 3, 1)
    return torch.index_select(table, 0, index.view(-1))


__all__ = ["ENCODING", "CompactTensor", "expand", "gather", "lut_array", "parse_encoding"]
