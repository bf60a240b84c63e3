from . import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MediaItem(_message.Message):
    __slots__ = ("data", "url", "video")
    DATA_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    url: str
    video: VideoOptions
    def __init__(self, data: _Optional[bytes] = ..., url: _Optional[str] = ..., video: _Optional[_Union[VideoOptions, _Mapping]] = ...) -> None: ...

class VideoOptions(_message.Message):
    __slots__ = ("do_sample_frames", "fps", "num_frames", "min_frames", "max_frames", "min_pixels", "max_pixels", "decoder")
    DO_SAMPLE_FRAMES_FIELD_NUMBER: _ClassVar[int]
    FPS_FIELD_NUMBER: _ClassVar[int]
    NUM_FRAMES_FIELD_NUMBER: _ClassVar[int]
    MIN_FRAMES_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAMES_FIELD_NUMBER: _ClassVar[int]
    MIN_PIXELS_FIELD_NUMBER: _ClassVar[int]
    MAX_PIXELS_FIELD_NUMBER: _ClassVar[int]
    DECODER_FIELD_NUMBER: _ClassVar[int]
    do_sample_frames: bool
    fps: float
    num_frames: int
    min_frames: int
    max_frames: int
    min_pixels: int
    max_pixels: int
    decoder: str
    def __init__(self, do_sample_frames: _Optional[bool] = ..., fps: _Optional[float] = ..., num_frames: _Optional[int] = ..., min_frames: _Optional[int] = ..., max_frames: _Optional[int] = ..., min_pixels: _Optional[int] = ..., max_pixels: _Optional[int] = ..., decoder: _Optional[str] = ...) -> None: ...

class PreprocessRequest(_message.Message):
    __slots__ = ("request_id", "model", "items", "dtype", "transport", "shm_namespace", "min_pixels", "max_pixels", "encoding")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    SHM_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MIN_PIXELS_FIELD_NUMBER: _ClassVar[int]
    MAX_PIXELS_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    items: _containers.RepeatedCompositeFieldContainer[MediaItem]
    dtype: str
    transport: str
    shm_namespace: str
    min_pixels: int
    max_pixels: int
    encoding: str
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., items: _Optional[_Iterable[_Union[MediaItem, _Mapping]]] = ..., dtype: _Optional[str] = ..., transport: _Optional[str] = ..., shm_namespace: _Optional[str] = ..., min_pixels: _Optional[int] = ..., max_pixels: _Optional[int] = ..., encoding: _Optional[str] = ...) -> None: ...

class ProcessedItem(_message.Message):
    __slots__ = ("pixel_values", "grid_thw", "num_tokens", "content_hash", "cache_hit", "transport", "video")
    PIXEL_VALUES_FIELD_NUMBER: _ClassVar[int]
    GRID_THW_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    VIDEO_FIELD_NUMBER: _ClassVar[int]
    pixel_values: _tensor_pb2.TensorData
    grid_thw: _containers.RepeatedScalarFieldContainer[int]
    num_tokens: int
    content_hash: bytes
    cache_hit: bool
    transport: str
    video: VideoInfo
    def __init__(self, pixel_values: _Optional[_Union[_tensor_pb2.TensorData, _Mapping]] = ..., grid_thw: _Optional[_Iterable[int]] = ..., num_tokens: _Optional[int] = ..., content_hash: _Optional[bytes] = ..., cache_hit: _Optional[bool] = ..., transport: _Optional[str] = ..., video: _Optional[_Union[VideoInfo, _Mapping]] = ...) -> None: ...

class VideoInfo(_message.Message):
    __slots__ = ("frames_indices", "fps", "total_num_frames", "duration", "width", "height", "timestamps", "decoder")
    FRAMES_INDICES_FIELD_NUMBER: _ClassVar[int]
    FPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NUM_FRAMES_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    DECODER_FIELD_NUMBER: _ClassVar[int]
    frames_indices: _containers.RepeatedScalarFieldContainer[int]
    fps: float
    total_num_frames: int
    duration: float
    width: int
    height: int
    timestamps: _containers.RepeatedScalarFieldContainer[float]
    decoder: str
    def __init__(self, frames_indices: _Optional[_Iterable[int]] = ..., fps: _Optional[float] = ..., total_num_frames: _Optional[int] = ..., duration: _Optional[float] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., timestamps: _Optional[_Iterable[float]] = ..., decoder: _Optional[str] = ...) -> None: ...

class Timings(_message.Message):
    __slots__ = ("queue_us", "decode_us", "preprocess_us", "transport_us", "total_us")
    QUEUE_US_FIELD_NUMBER: _ClassVar[int]
    DECODE_US_FIELD_NUMBER: _ClassVar[int]
    PREPROCESS_US_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_US_FIELD_NUMBER: _ClassVar[int]
    TOTAL_US_FIELD_NUMBER: _ClassVar[int]
    queue_us: int
    decode_us: int
    preprocess_us: int
    transport_us: int
    total_us: int
    def __init__(self, queue_us: _Optional[int] = ..., decode_us: _Optional[int] = ..., preprocess_us: _Optional[int] = ..., transport_us: _Optional[int] = ..., total_us: _Optional[int] = ...) -> None: ...

class PreprocessResponse(_message.Message):
    __slots__ = ("request_id", "items", "timings")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    items: _containers.RepeatedCompositeFieldContainer[ProcessedItem]
    timings: Timings
    def __init__(self, request_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[ProcessedItem, _Mapping]]] = ..., timings: _Optional[_Union[Timings, _Mapping]] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "family", "config_fingerprint", "patch_size", "merge_size", "temporal_patch_size", "default_dtype", "min_pixels", "max_pixels", "max_image_pixels", "source", "backend", "takes_video")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MERGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TEMPORAL_PATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    MIN_PIXELS_FIELD_NUMBER: _ClassVar[int]
    MAX_PIXELS_FIELD_NUMBER: _ClassVar[int]
    MAX_IMAGE_PIXELS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    TAKES_VIDEO_FIELD_NUMBER: _ClassVar[int]
    name: str
    family: str
    config_fingerprint: str
    patch_size: int
    merge_size: int
    temporal_patch_size: int
    default_dtype: str
    min_pixels: int
    max_pixels: int
    max_image_pixels: int
    source: str
    backend: str
    takes_video: bool
    def __init__(self, name: _Optional[str] = ..., family: _Optional[str] = ..., config_fingerprint: _Optional[str] = ..., patch_size: _Optional[int] = ..., merge_size: _Optional[int] = ..., temporal_patch_size: _Optional[int] = ..., default_dtype: _Optional[str] = ..., min_pixels: _Optional[int] = ..., max_pixels: _Optional[int] = ..., max_image_pixels: _Optional[int] = ..., source: _Optional[str] = ..., backend: _Optional[str] = ..., takes_video: _Optional[bool] = ...) -> None: ...

class GetModelInfoResponse(_message.Message):
    __slots__ = ("models", "default_model", "shm_namespace", "default_transport", "shm_min_bytes", "max_message_bytes", "pixel_cache_bytes", "version", "rdma_available", "rdma_max_bytes")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODEL_FIELD_NUMBER: _ClassVar[int]
    SHM_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    SHM_MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIXEL_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RDMA_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    RDMA_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    default_model: str
    shm_namespace: str
    default_transport: str
    shm_min_bytes: int
    max_message_bytes: int
    pixel_cache_bytes: int
    version: str
    rdma_available: bool
    rdma_max_bytes: int
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ..., default_model: _Optional[str] = ..., shm_namespace: _Optional[str] = ..., default_transport: _Optional[str] = ..., shm_min_bytes: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., pixel_cache_bytes: _Optional[int] = ..., version: _Optional[str] = ..., rdma_available: _Optional[bool] = ..., rdma_max_bytes: _Optional[int] = ...) -> None: ...
