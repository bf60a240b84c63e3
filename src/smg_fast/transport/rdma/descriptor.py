"""The RemoteTensorHandle descriptor (versioned JSON, never pickle) and the slot frame check."""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass

import numpy as np

from ... import _native
from .errors import DescriptorError, StaleSlotError

VERSION = 1
# RemoteTensorHandle.transport. Not plain "nixl": other readers of RemoteTensorHandle (smg's
# TokenSpeed servicer) use "nixl" for their own binary descriptor, and each side must refuse the
# other's handles by name instead of misparsing them.
TRANSPORT = "nixl/smg-fast-v1"
_MAX_BYTES = 4096
_HEADER = struct.Struct("<QIIQQQ")  # magic, version, reserved, generation, payload bytes, key hash


@dataclass(frozen=True)
class Descriptor:
    """Where a tensor waits.

    Exporter agent and metadata endpoint, frame address and length in the exporter's arena, payload
    size, the lease's generation and its key (the free tag)."""

    agent: str
    host: str
    port: int
    addr: int
    frame_len: int
    nbytes: int
    generation: int
    key: str

    def encode(self) -> bytes:
        return json.dumps({"v": VERSION, **asdict(self)}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Descriptor:
        if len(data) > _MAX_BYTES:
            raise DescriptorError(f"descriptor of {len(data)} bytes is too long")
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise DescriptorError("descriptor is not smg-fast JSON") from None
        if not isinstance(obj, dict) or obj.get("v") != VERSION:
            version = obj.get("v") if isinstance(obj, dict) else None
            raise DescriptorError(f"descriptor version {version!r} is not supported (this "
                                  f"smg-fast reads version {VERSION})")
        fields = {"agent": str, "host": str, "port": int, "addr": int, "frame_len": int,
                  "nbytes": int, "generation": int, "key": str}
        for name, kind in fields.items():
            if type(obj.get(name)) is not kind:
                raise DescriptorError(f"descriptor field {name!r} is missing or not "
                                      f"{kind.__name__}")
        desc = cls(**{name: obj[name] for name in fields})
        if not 0 < desc.port < 65536 or desc.addr <= 0 or desc.nbytes < 0:
            raise DescriptorError("descriptor has an invalid port, address or size")
        if desc.frame_len != _native.frame_bytes(desc.nbytes):
            raise DescriptorError(f"descriptor frame length {desc.frame_len} does not match "
                                  f"{desc.nbytes} payload bytes")
        return desc


def check_frame(frame: np.ndarray, desc: Descriptor) -> None:
    """Raises StaleSlotError unless the READ frame is exactly the lease the descriptor names."""
    magic, version, _, gen, nbytes, khash = _HEADER.unpack_from(frame, 0)
    if magic != _native.FRAME_MAGIC or version != _native.FRAME_VERSION:
        raise StaleSlotError("the slot does not hold an smg-fast frame")
    trailer_at = _native.FRAME_HEADER + ((desc.nbytes + 7) & ~7)
    (trailer,) = struct.unpack_from("<Q", frame, trailer_at)
    if gen != desc.generation or trailer != desc.generation:
        # Says nothing about the generation found: it would help forge a handle for that lease.
        raise StaleSlotError("the slot's generation does not match the handle's: the slot was "
                             "reaped and reused")
    if nbytes != desc.nbytes or khash != _native.key_hash(desc.key):
        raise StaleSlotError("the slot holds another tensor than the handle names")
