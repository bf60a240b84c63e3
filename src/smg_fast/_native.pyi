"""Types of smg_fast._native, the C++ core (csrc/bind_*.cpp are its only pybind11 files).

Written by hand; tests/numerics/test_native_boundary.py checks it against the built module
(every name, every parameter, every enum member), so a binding change that forgets this file
fails there.
"""

from collections.abc import Sequence
from typing import Any, ClassVar, Literal, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str

class _Enum:
    """What pybind11's py::enum_ types have in common: int(member) is the C++ value."""

    __members__: ClassVar[dict[str, Any]]
    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class Filter(_Enum):
    """Resampling filter; values are Pillow's Image.Resampling values."""

    NEAREST: ClassVar[Filter]
    LANCZOS: ClassVar[Filter]
    BILINEAR: ClassVar[Filter]
    BICUBIC: ClassVar[Filter]
    BOX: ClassVar[Filter]
    HAMMING: ClassVar[Filter]

class PassOrder(_Enum):
    """Which separable pass runs first; Pillow 13 changed the rule."""

    HORIZONTAL_FIRST: ClassVar[PassOrder]
    PILLOW13: ClassVar[PassOrder]

class Resampler(_Enum):
    """Whose resize is reproduced: Pillow's, or torch's uint8 antialias (3 filters)."""

    PILLOW: ClassVar[Resampler]
    TORCH: ClassVar[Resampler]

class PixelFormat(_Enum):
    """How run() reads a decoded image's bytes.

    Formats other than RGB / RGBX are converted to RGB row by row while read, with the named
    reference's arithmetic."""

    RGB: ClassVar[PixelFormat]
    RGBX: ClassVar[PixelFormat]
    GRAY: ClassVar[PixelFormat]
    GRAY_ALPHA_DROP: ClassVar[PixelFormat]
    GRAY_ALPHA_OVER_WHITE_PILLOW: ClassVar[PixelFormat]
    RGBA_OVER_WHITE_PILLOW: ClassVar[PixelFormat]
    RGBA_OVER_WHITE_NUMPY: ClassVar[PixelFormat]
    RGBA_OVER_WHITE_TORCH: ClassVar[PixelFormat]

class DType(_Enum):
    """Output element type (bfloat16 is held as uint16 bits in NumPy)."""

    FLOAT32: ClassVar[DType]
    BFLOAT16: ClassVar[DType]
    FLOAT16: ClassVar[DType]
    UINT8: ClassVar[DType]

class LutRecipe(_Enum):
    """The reference's normalization arithmetic, operation for operation."""

    HF_RESCALE_NORMALIZE: ClassVar[LutRecipe]
    KIMI_DIVIDE_MULTIPLY: ClassVar[LutRecipe]
    TORCH_FUSED_NORMALIZE: ClassVar[LutRecipe]
    TORCH_RESCALE: ClassVar[LutRecipe]

class PatchOrder(_Enum):
    """Where a patch's values go inside its output row."""

    CHANNELS_FIRST: ClassVar[PatchOrder]
    CHANNELS_LAST: ClassVar[PatchOrder]

class Pipeline:
    """Resize + normalize + patchify for one processor and output dtype, validated once."""

    def __init__(
        self,
        *,
        recipe: LutRecipe,
        rescale: float,
        mean: Sequence[float],
        std: Sequence[float],
        dtype: DType,
        filter: Filter,
        pass_order: PassOrder,
        patch: int,
        merge: int,
        temporal: int,
        resampler: Resampler = ...,
        patch_order: PatchOrder = ...,
    ) -> None: ...
    def run(
        self,
        src: npt.NDArray[np.uint8],
        resize_w: int,
        resize_h: int,
        grid_h: int,
        grid_w: int,
        dst: np.ndarray,
        offset: int = 0,
        *,
        fmt: PixelFormat | None = None,
        jpeg: bytes | bytearray | memoryview | None = None,
        decode_seconds: npt.NDArray[np.float64] | None = None,
        left: int = 0,
        top: int = 0,
        slot: int = 0,
        slots: int = 1,
    ) -> int: ...
    def output_elems(self, resize_w: int, resize_h: int, grid_h: int, grid_w: int) -> int: ...
    @property
    def lut(self) -> np.ndarray: ...
    @property
    def kernel(
        self,
    ) -> Literal[
        "avx512-fast", "avx512", "avx2-fast", "avx2-gather", "neon-fast", "neon", "table", "copy"
    ]: ...
    @property
    def fixed_kernel(
        self,
    ) -> Literal[
        "avx512-fast", "avx512", "avx2-fast", "avx2-gather", "neon-fast", "neon", "table", "copy"
    ]: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def recipe(self) -> LutRecipe: ...
    @property
    def rescale(self) -> float: ...
    @property
    def mean(self) -> tuple[float, float, float]: ...
    @property
    def std(self) -> tuple[float, float, float]: ...
    @property
    def filter(self) -> Filter: ...
    @property
    def pass_order(self) -> PassOrder: ...
    @property
    def resampler(self) -> Resampler: ...
    @property
    def patch(self) -> int: ...
    @property
    def merge(self) -> int: ...
    @property
    def temporal(self) -> int: ...
    @property
    def patch_order(self) -> PatchOrder: ...
    @property
    def row_elems(self) -> int: ...

def expand_lut(
    codes: npt.NDArray[np.uint8], lut: npt.NDArray[Any], run: int, out: npt.NDArray[Any]
) -> None: ...
def resize(
    src: npt.NDArray[np.uint8],
    out_w: int,
    out_h: int,
    filter: Filter,
    pass_order: PassOrder,
    resampler: Resampler = ...,
) -> npt.NDArray[np.uint8]: ...
def resize_rgb(
    src: npt.NDArray[np.uint8],
    out_w: int,
    out_h: int,
    filter: Filter,
    pass_order: PassOrder,
    resampler: Resampler,
    fmt: PixelFormat,
) -> npt.NDArray[np.uint8]: ...
def patches_to_planar(
    patches: np.ndarray,
    grid_h: int,
    grid_w: int,
    patch: int,
    dst: np.ndarray,
    offset: int,
    canvas_h: int,
    canvas_w: int,
) -> None: ...
def resize_rows_read(
    src: npt.NDArray[np.uint8],
    out_w: int,
    out_h: int,
    filter: Filter,
    pass_order: PassOrder,
    resampler: Resampler,
    y1: int,
) -> int: ...
def bicubic_float_tiles(src: npt.NDArray[np.float32], rows: int, cols: int,
                        out: npt.NDArray[np.float32]) -> None: ...
def resize_opencv_cubic(
    src: npt.NDArray[np.uint8] | npt.NDArray[np.float32],
    out_w: int,
    out_h: int,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    channels: int = 0,
) -> npt.NDArray[np.float32]: ...
def to_rgb(src: npt.NDArray[np.uint8], fmt: PixelFormat) -> npt.NDArray[np.uint8]: ...
def arrow_rgbx(schema: Any, array: Any, width: int, height: int) -> npt.NDArray[np.uint8]: ...
def png_unfilter(data: npt.NDArray[np.uint8], height: int, row_bytes: int, bpp: int) -> bool: ...
def jpeg_bind(path: str) -> str: ...
def jpeg_decode(
    data: bytes | bytearray | memoryview, out: npt.NDArray[np.uint8], bands: int
) -> int: ...
def map_file(fd: int, offset: int, nbytes: int) -> npt.NDArray[np.uint8]: ...
def pooled_empty(nbytes: int, zero: bool = False,
                 huge_pages: bool = True) -> npt.NDArray[np.uint8]: ...

class _ScratchStats(TypedDict):
    hits: int
    misses: int
    gives: int
    drops: int
    remote_gives: int
    pooled_bytes: int
    live_bytes: int
    cap_bytes: int
    total_cap_bytes: int
    thread_pooled_bytes: int

def scratch_stats() -> _ScratchStats: ...

class _ShapeCacheStats(TypedDict):
    hits: int
    misses: int
    entries: int
    bytes: int

def shape_cache_stats() -> _ShapeCacheStats: ...
def shape_cache_clear() -> None: ...
def scratch_release() -> None: ...
def scratch_set_cap(bytes: int) -> None: ...
def scratch_set_total_cap(bytes: int) -> None: ...
def set_num_threads(n: int) -> None: ...
def num_threads() -> int: ...
def available_cpus() -> int: ...
def cpu_features() -> dict[str, bool]: ...

class _KernelEntry(TypedDict):
    stage: str
    name: str
    arch: str
    min_cap: str
    ran: bool

class _TuneChoice(TypedDict):
    stage: str
    key: str
    kernel: str
    median_us: dict[str, float]

class _Tuning(TypedDict):
    enabled: bool
    env: str | None
    choices: list[_TuneChoice]

class _KernelInfo(TypedDict):
    isa_cap: str
    isa_cap_env: str | None
    host: dict[str, bool]
    selected: dict[str, str]
    kernels: list[_KernelEntry]
    tuning: _Tuning

def kernel_info() -> _KernelInfo: ...

FRAME_HEADER: int
FRAME_MAGIC: int
FRAME_VERSION: int

def frame_bytes(payload_len: int) -> int: ...
def key_hash(key: str) -> int: ...

class _Lease(TypedDict):
    slot: int
    generation: int
    frame_offset: int
    frame_len: int
    payload_offset: int
    payload_len: int

class _ArenaCounters(TypedDict):
    leased: int
    committed: int
    freed: int
    reaped: int
    full: int
    too_large: int
    unknown_free: int
    refused_free: int
    in_use: int

class SlotArena:
    """The RDMA slot arena: equal pre-faulted slots leased by key, committed, freed or reaped."""

    def __init__(self, slots: int, slot_bytes: int, ttl_s: float) -> None: ...
    @property
    def address(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def slot_bytes(self) -> int: ...
    @property
    def max_payload(self) -> int: ...
    @property
    def ttl_s(self) -> float: ...
    @property
    def in_use(self) -> int: ...
    def lease(self, key: str, payload_len: int) -> _Lease | None: ...
    def commit(self, key: str) -> bool: ...
    def free(self, key: str) -> bool: ...
    def abort(self, key: str) -> bool: ...
    def reap(self) -> int: ...
    def reap_after(self, seconds: float) -> int: ...
    def view(self, offset: int, nbytes: int) -> npt.NDArray[np.uint8]: ...
    def copy_in(self, key: str, src: np.ndarray) -> _Lease | None: ...
    def counters(self) -> _ArenaCounters: ...
