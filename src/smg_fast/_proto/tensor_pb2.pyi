from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TensorData(_message.Message):
    __slots__ = ("shape", "dtype", "inline", "shm", "remote", "encoding", "lut")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    LUT_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    inline: bytes
    shm: ShmHandle
    remote: RemoteTensorHandle
    encoding: str
    lut: LutTable
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ..., inline: _Optional[bytes] = ..., shm: _Optional[_Union[ShmHandle, _Mapping]] = ..., remote: _Optional[_Union[RemoteTensorHandle, _Mapping]] = ..., encoding: _Optional[str] = ..., lut: _Optional[_Union[LutTable, _Mapping]] = ...) -> None: ...

class LutTable(_message.Message):
    __slots__ = ("dtype", "table", "run")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    table: bytes
    run: int
    def __init__(self, dtype: _Optional[str] = ..., table: _Optional[bytes] = ..., run: _Optional[int] = ...) -> None: ...

class ShmHandle(_message.Message):
    __slots__ = ("name", "offset", "nbytes", "owner_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    offset: int
    nbytes: int
    owner_id: str
    def __init__(self, name: _Optional[str] = ..., offset: _Optional[int] = ..., nbytes: _Optional[int] = ..., owner_id: _Optional[str] = ...) -> None: ...

class RemoteTensorHandle(_message.Message):
    __slots__ = ("transport", "descriptor", "nbytes")
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    transport: str
    descriptor: bytes
    nbytes: int
    def __init__(self, transport: _Optional[str] = ..., descriptor: _Optional[bytes] = ..., nbytes: _Optional[int] = ...) -> None: ...
