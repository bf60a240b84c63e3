"""TensorData: encode tensors for the wire, and read any TensorData back.

Payloads: ``inline`` (bytes in the message), ``shm`` (a file directly under /dev/shm, see
:mod:`smg_fast.transport.shm`: written once by the producer, mapped and unlinked by the
consumer) and ``remote`` (RDMA, read with :mod:`smg_fast.transport.rdma`).

The consumer side is :func:`read_tensor`; it accepts any message with TensorData's fields. The
producer side is :func:`to_tensor_data`, :func:`shm_tensor_data` and :func:`inline_tensor_data`
(these need protobuf), over :class:`ShmRegistry`.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _native
from .dtypes import TENSOR_DTYPES, tensor_dtype  # noqa: F401  (public via this module)
from .encoding import decoded, read_encoding
from .errors import TensorError, UntrustedSegmentError
from .shm import (
    SHM_DIR,
    SHM_PREFIX,
    ShmNameError,
    ShmRegistry,
    ShmSegment,
    check_shm_name,
    create_segment,
    is_segment_name,
    owner_id,
    shm_namespace,
    sweep_dead_segments,
)


def _pb():
    try:
        from .._proto import tensor_pb2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("TensorData messages need protobuf: pip install 'smg-fast[server]'") \
            from exc
    return tensor_pb2


def inline_tensor_data(data: bytes, shape: tuple[int, ...], dtype: str) -> Any:
    return _pb().TensorData(shape=[int(s) for s in shape], dtype=dtype, inline=data)


def shm_tensor_data(name: str, shape: tuple[int, ...], dtype: str, nbytes: int,
                    offset: int = 0) -> Any:
    pb = _pb()
    handle = pb.ShmHandle(name=name, offset=offset, nbytes=nbytes, owner_id=owner_id())
    return pb.TensorData(shape=[int(s) for s in shape], dtype=dtype, shm=handle)


def to_tensor_data(array: np.ndarray, dtype: str | None = None, transport: str = "inline",
                   registry: ShmRegistry | None = None) -> Any:
    """Encodes an array as TensorData.

    ``dtype``: the TensorData dtype name, e.g. "bfloat16" for a uint16 array of bfloat16 bits;
    default the array's own."""
    name, np_dtype = tensor_dtype(dtype or array.dtype.name)
    src = np.ascontiguousarray(array)
    if src.dtype.str != np_dtype.str:
        raise TensorError(f"array dtype {array.dtype} does not hold {name}")
    if transport == "inline":
        return inline_tensor_data(src.tobytes(), src.shape, name)
    if transport != "shm":
        raise ValueError(f"transport must be 'inline' or 'shm', got {transport!r}")
    if src.nbytes == 0:
        return inline_tensor_data(b"", src.shape, name)
    reg = registry or ShmRegistry()

    def fill(seg: ShmSegment) -> None:
        seg.array(np.uint8)[:] = src.reshape(-1).view(np.uint8)

    seg_name, offset = reg.deliver(src.nbytes, fill)
    return shm_tensor_data(seg_name, src.shape, name, src.nbytes, offset)


# ------------------------------------------------------------------------------------------
# Consumer side
# ------------------------------------------------------------------------------------------


def read_tensor(tensor_data: Any, *, as_torch: bool = False, unlink: bool = True,
                shm_dir: str = SHM_DIR, puller: Any = None,
                trusted_uids: Iterable[int] | None = None, expand: bool = False) -> Any:
    """The array a TensorData describes, for any payload kind.

    inline: a read-only view of the message bytes (a copy when ``as_torch``). shm: the name must
    be an smg-fast segment name (``smg-fast-<pid>-<nonce>-<seq>``, agreeing with the handle's
    owner_id when it has one), the file is opened with O_NOFOLLOW, must be a regular file owned
    by this process's user, root or one of ``trusted_uids``, hold at least offset + nbytes, and
    nbytes must equal product(shape) * itemsize (else :class:`UntrustedSegmentError` /
    TensorError, with nothing mapped or unlinked); it is mapped copy-on-write (writable, no
    copy) and, with ``unlink``, removed once mapped. A handle with a non-zero offset may name a
    reused segment: its producer reuses the file only once the name is gone and nobody has it
    open or mapped, so the array stays valid as long as it lives, and dropping it (after the
    unlink) is what releases the segment. bfloat16 comes back as uint16 bits with
    numpy and as ``torch.bfloat16`` with ``as_torch``. remote: pulled by ``puller`` (default
    :func:`smg_fast.transport.rdma.default_puller`, created on first use) into its landing
    pool. Raises TensorError for a malformed handle, FileNotFoundError for a segment that no
    longer exists and :class:`smg_fast.transport.rdma.RdmaError` subclasses for a remote tensor
    that cannot be pulled. An encoded TensorData ("uint8+lut", see
    :mod:`smg_fast.transport.encoding`) comes back as a :class:`smg_fast.CompactTensor` of its
    codes (NumPy or torch), or with ``expand`` as the tensor it encodes; an unknown encoding or a
    malformed table raises TensorError before the payload is read.
    """
    fields = read_encoding(tensor_data)
    if fields is not None:
        codes = read_tensor(_Plain(tensor_data), as_torch=as_torch, unlink=unlink,
                            shm_dir=shm_dir, puller=puller, trusted_uids=trusted_uids)
        return decoded(codes, fields, as_torch, expand)
    dtype_name, np_dtype = tensor_dtype(tensor_data.dtype)
    shape = tuple(int(s) for s in tensor_data.shape)
    count = math.prod(shape)
    nbytes = count * np_dtype.itemsize
    kind = tensor_data.WhichOneof("payload")
    if kind == "inline":
        data = tensor_data.inline
        if len(data) != nbytes:
            raise TensorError(f"inline tensor has {len(data)} bytes, shape {list(shape)} "
                              f"{dtype_name} needs {nbytes}")
        arr = np.frombuffer(data, dtype=np_dtype).reshape(shape)
        if as_torch:
            arr = arr.copy()
    elif kind == "shm":
        arr = _read_shm(tensor_data.shm, shape, np_dtype, nbytes, unlink, shm_dir,
                        trusted_uids)
    elif kind == "remote":
        from .rdma import default_puller
        from .rdma.remote import parse_remote

        parse_remote(tensor_data)  # a malformed handle fails here, before any NIXL agent exists
        return (puller or default_puller()).pull(tensor_data, as_torch=as_torch)
    else:
        raise TensorError("TensorData has no payload")
    if as_torch:
        from .._dtypes import to_torch

        return to_torch(arr, dtype_name)
    return arr


class _Plain:
    """A TensorData seen without its encoding (its payload read as the plain tensor)."""

    def __init__(self, tensor_data: Any) -> None:
        self._td = tensor_data
        self.encoding = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._td, name)


def _check_producer(handle: Any) -> None:
    """Only names of this project's segments, and agreeing with the handle's owner_id."""
    name = handle.name
    try:
        check_shm_name(name)
    except ShmNameError as exc:
        raise TensorError(str(exc)) from None
    if not is_segment_name(name):
        raise UntrustedSegmentError(f"shm handle names {name!r}, which is not an smg-fast "
                                    "segment (smg-fast-<pid>-<nonce>-<seq>)")
    owner = str(handle.owner_id)
    if owner and not (owner.startswith("smg-fast:")
                      and name.startswith(SHM_PREFIX + owner[len("smg-fast:"):] + "-")):
        raise UntrustedSegmentError(f"shm segment {name!r} was not made by the handle's "
                                    f"owner {owner!r}")


def _read_shm(handle: Any, shape: tuple[int, ...], np_dtype: np.dtype, nbytes: int,
              unlink: bool, shm_dir: str, trusted_uids: Iterable[int] | None) -> np.ndarray:
    name = handle.name
    _check_producer(handle)
    if int(handle.nbytes) != nbytes:
        raise TensorError(f"shm segment {name!r}: handle says {handle.nbytes} bytes, shape "
                          f"{list(shape)} {np_dtype} needs {nbytes}")
    offset = int(handle.offset)
    path = os.path.join(shm_dir, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileNotFoundError(f"shm segment {name!r} does not exist (already read, or its "
                                "producer unlinked it)") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink
            raise TensorError(f"shm segment {name!r} is a symlink") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TensorError(f"shm segment {name!r} is not a regular file")
        if st.st_uid not in {os.geteuid(), 0, *(trusted_uids or ())}:
            raise UntrustedSegmentError(f"shm segment {name!r} belongs to uid {st.st_uid}, "
                                        "not to this user, root or a trusted_uids entry")
        if st.st_size < offset + nbytes:
            raise TensorError(f"shm segment {name!r} holds {st.st_size} bytes, the handle needs "
                              f"{offset + nbytes} (offset {offset} + {nbytes})")
        if nbytes == 0:
            arr = np.empty(shape, dtype=np_dtype)
        else:
            # copy-on-write, and no descriptor kept (Python's mmap would hold one per tensor)
            try:
                arr = _native.map_file(fd, offset, nbytes).view(np_dtype).reshape(shape)
            except OSError as exc:  # e.g. ENOMEM for a huge (sparse) segment
                raise TensorError(f"shm segment {name!r}: cannot map {nbytes} bytes "
                                  f"({exc.strerror})") from None
    finally:
        os.close(fd)
    if unlink:
        # Remove the name only if it still is the file we mapped.
        try:
            cur = os.lstat(path)
            if (cur.st_ino, cur.st_dev) == (st.st_ino, st.st_dev):
                os.unlink(path)
        except FileNotFoundError:
            pass
    return arr


__all__ = [
    "SHM_DIR",
    "ShmNameError",
    "ShmRegistry",
    "ShmSegment",
    "TensorError",
    "UntrustedSegmentError",
    "check_shm_name",
    "create_segment",
    "inline_tensor_data",
    "owner_id",
    "read_tensor",
    "shm_namespace",
    "shm_tensor_data",
    "sweep_dead_segments",
    "tensor_dtype",
    "to_tensor_data",
]
