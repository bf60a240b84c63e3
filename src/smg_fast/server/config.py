"""The server's settings (``ServerConfig``), their defaults and their checks.

Flags.py reads them from the command line and the environment."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from .._service.admission import queued_bytes_limit
from .._service.grpc_server import STREAM_WINDOW_KB
from .._service.process import LOG_LEVELS
from .._service.receipt import RECEIVE_TIMEOUT_S, RECEIVING_PER_CONNECTION, receiving_limit
from ..imaging.media import DEFAULT_IMAGE_FORMATS, normalize_formats
from ..processors.config import default_max_image_pixels
from ..transport.rdma import DEFAULT_PORT as RDMA_DEFAULT_PORT
from ..transport.rdma import DEFAULT_SLOT_BYTES, DEFAULT_SLOT_TTL_S, DEFAULT_SLOTS
from ..video.container import VideoLimits
from ..video.convert import DECODERS
from .decode_budget import DECODE_WAIT_S, decode_bytes_limit
from .shm_shares import parse_networks

VIDEO_DECODES = ("skip", "full")  # --video-decode

TRANSPORTS = ("inline", "shm", "auto", "rdma")


def _default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _default_max_image_pixels() -> int:
    """Pillow's decompression-bomb limit as the flag counts it (0: none)."""
    return default_max_image_pixels() or 0


@dataclass
class ServerConfig:
    """Every setting of one server; ``validate()`` checks them (ValueError naming the flag)."""

    host: str = "127.0.0.1"
    port: int = 50051
    models: list[tuple[str, str]] = field(default_factory=lambda: [("qwen2_vl", "qwen2_vl")])
    workers: int = field(default_factory=_default_workers)
    max_message_mb: int = 256
    pixel_cache_mb: int = 0
    transport: str = "inline"
    shm_min_bytes: int = 65536
    allowed_media_dirs: list[str] = field(default_factory=list)
    max_image_pixels: int = field(default_factory=_default_max_image_pixels)
    metrics_port: int = 0
    log_level: str = "info"
    drain_timeout_s: float = 30.0
    shm_ttl_s: float = 600.0
    shm_pool_mb: int = 256
    shm_reuse: int = 1
    shm_max_outstanding_mb: int = 0  # 0: half of min(shm dir's tmpfs, RAM)
    shm_dir: str = "/dev/shm"
    rdma_listen_host: str = "127.0.0.1"
    rdma_listen_port: int = RDMA_DEFAULT_PORT
    rdma_slots: int = DEFAULT_SLOTS
    rdma_slot_bytes: int = DEFAULT_SLOT_BYTES
    rdma_slot_ttl_s: float = DEFAULT_SLOT_TTL_S
    rdma_min_bytes: int = 65536
    rdma_caller_slots: int = 0  # 0: auto, see rdma_caller_slots_limit
    max_output_mb: int = 1024
    image_formats: str = ",".join(DEFAULT_IMAGE_FORMATS)
    max_queued_requests: int = 0  # 0: auto, see queued_requests_limit
    max_queued_mb: int = 0  # 0: auto, see queued_bytes_limit
    max_decode_mb: int = 0  # 0: auto, see decode_bytes_limit
    decode_wait_s: float = DECODE_WAIT_S
    max_receiving_per_connection: int = RECEIVING_PER_CONNECTION
    max_receiving: int = 0  # 0: auto, see receiving_limit
    stream_window_kb: int = 256
    receive_timeout_s: float = RECEIVE_TIMEOUT_S
    single_flight_wait_s: float = 10.0
    video_max_seconds: float = VideoLimits.max_duration_s
    video_max_frames: int = VideoLimits.max_frames
    video_max_frame_pixels: int = VideoLimits.max_frame_pixels
    video_threads: int = -1  # -1: PyAV's defaults (slice threads), as transformers' loader
    video_decoder: str = "pyav"  # whose frames a video item gets unless it names a decoder
    video_decode: str = "skip"  # "full": every frame to the last sampled, as the loader
    trusted_router_peers: list[str] = field(default_factory=list)  # IPs / networks

    @property
    def rdma_slot_mb(self) -> float:
        return self.rdma_slot_bytes / 2**20

    @property
    def rdma_arena_bytes(self) -> int:
        """Memory the RDMA arena pins once the lane is up."""
        return self.rdma_slots * self.rdma_slot_bytes

    @property
    def rdma_caller_slots_limit(self) -> int:
        """RDMA slots one caller may hold at once; auto: a quarter of the slots, at least one."""
        return self.rdma_caller_slots or max(1, self.rdma_slots // 4)

    @property
    def queued_requests_limit(self) -> int:
        """Preprocess requests admitted at once (running or waiting for a worker)."""
        return self.max_queued_requests or max(32, 8 * self.workers)

    @property
    def queued_bytes_limit(self) -> int:
        """Request bytes admitted at once; auto: 1/8 of physical memory, at most 1 GiB."""
        return queued_bytes_limit(self.max_queued_mb)

    @property
    def receiving_limit(self) -> int:
        """Calls reading their message at once, all connections together.

        Auto: as many --max-message-mb messages as --max-queued-mb holds, at least
        --max-receiving-per-connection."""
        return receiving_limit(self.max_receiving, self.max_receiving_per_connection,
                               self.queued_bytes_limit, self.max_message_bytes)

    @property
    def decode_bytes_limit(self) -> int:
        """Planned decode memory held at once.

        Auto: a quarter of physical memory or of the cgroup's memory limit, >= 256 MiB."""
        return decode_bytes_limit(self.max_decode_mb)

    @property
    def video_limits(self) -> VideoLimits:
        """What a video item's header may declare (the --video-max-* flags)."""
        return VideoLimits(max_frames=self.video_max_frames,
                           max_frame_pixels=self.video_max_frame_pixels,
                           max_duration_s=self.video_max_seconds)

    @property
    def video_decoder_threads(self) -> int | None:
        """FFmpeg threads per video decode: None for PyAV's defaults (--video-threads -1)."""
        return None if self.video_threads < 0 else self.video_threads

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    @property
    def max_output_bytes(self) -> int:
        return self.max_output_mb * 1024 * 1024

    @property
    def image_format_list(self) -> tuple[str, ...]:
        return normalize_formats(self.image_formats)

    def validate(self) -> ServerConfig:
        floats = {"--drain-timeout-s": self.drain_timeout_s, "--shm-ttl-s": self.shm_ttl_s,
                  "--rdma-slot-ttl-s": self.rdma_slot_ttl_s,
                  "--single-flight-wait-s": self.single_flight_wait_s,
                  "--receive-timeout-s": self.receive_timeout_s,
                  "--decode-wait-s": self.decode_wait_s,
                  "--video-max-seconds": self.video_max_seconds}
        for flag, value in floats.items():
            if not math.isfinite(value):
                raise ValueError(f"{flag} must be a finite number, got {value}")
        if not self.models:
            raise ValueError("at least one --model is needed")
        names = [n for n, _ in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate model names: {names}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be 0..65535, got {self.port}")
        if not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"--metrics-port must be 0..65535, got {self.metrics_port}")
        if not 1 <= self.workers <= 1024:
            raise ValueError(f"--workers must be 1..1024, got {self.workers}")
        if not 1 <= self.max_message_mb <= 2047:
            raise ValueError(f"--max-message-mb must be 1..2047, got {self.max_message_mb}")
        if min(self.pixel_cache_mb, self.shm_min_bytes, self.max_image_pixels,
               self.shm_pool_mb, self.shm_max_outstanding_mb) < 0:
            raise ValueError("--pixel-cache-mb, --shm-min-bytes, --shm-pool-mb, "
                             "--shm-max-outstanding-mb and --max-image-pixels must be >= 0")
        if self.shm_reuse not in (0, 1):
            raise ValueError(f"--shm-reuse must be 0 or 1, got {self.shm_reuse}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"--transport must be one of {TRANSPORTS}, got {self.transport!r}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"--log-level must be one of {LOG_LEVELS}")
        if self.drain_timeout_s < 0 or self.shm_ttl_s < 0:
            raise ValueError("--drain-timeout-s and --shm-ttl-s must be >= 0")
        if not 0 <= self.rdma_listen_port <= 65535:
            raise ValueError(f"--rdma-listen-port must be 0..65535, got {self.rdma_listen_port}")
        if not 1 <= self.rdma_slots <= 4096:
            raise ValueError(f"--rdma-slots must be 1..4096, got {self.rdma_slots}")
        if not 1 << 16 <= self.rdma_slot_bytes <= 1 << 40:
            raise ValueError("--rdma-slot-mb must be at least 64 KiB and at most 1 TiB")
        if self.rdma_slot_ttl_s < 1 or self.rdma_min_bytes < 0:
            raise ValueError("--rdma-slot-ttl-s must be >= 1 and --rdma-min-bytes >= 0")
        if not 0 <= self.rdma_caller_slots <= self.rdma_slots:
            raise ValueError(f"--rdma-caller-slots must be 0 (auto) .. --rdma-slots "
                             f"({self.rdma_slots}), got {self.rdma_caller_slots}")
        if self.max_output_mb < 1:
            raise ValueError(f"--max-output-mb must be >= 1, got {self.max_output_mb}")
        try:
            normalize_formats(self.image_formats)
        except ValueError as exc:
            raise ValueError(f"--image-formats: {exc}") from None
        if self.max_queued_requests < 0 or self.max_queued_mb < 0 or self.max_decode_mb < 0:
            raise ValueError("--max-queued-requests, --max-queued-mb and --max-decode-mb must "
                             "be >= 0")
        if not 1 <= self.max_receiving_per_connection <= 64:
            raise ValueError(f"--max-receiving-per-connection must be 1..64 (HTTP/2 streams per "
                             f"connection), got {self.max_receiving_per_connection}")
        if not 0 <= self.max_receiving <= 65536:
            raise ValueError(f"--max-receiving must be 0 (auto) .. 65536, got "
                             f"{self.max_receiving}")
        lo, hi = STREAM_WINDOW_KB
        if not lo <= self.stream_window_kb <= hi:
            raise ValueError(f"--stream-window-kb must be {lo}..{hi}, got "
                             f"{self.stream_window_kb}")
        if not 0 < self.receive_timeout_s <= 3600:
            raise ValueError("--receive-timeout-s must be in (0, 3600]")
        if not 0 <= self.decode_wait_s <= 3600:
            raise ValueError("--decode-wait-s must be in [0, 3600]")
        if not 0 < self.single_flight_wait_s <= 3600:
            raise ValueError("--single-flight-wait-s must be in (0, 3600]")
        if not (0 < self.video_max_seconds <= 86400 and self.video_max_frames >= 1
                and self.video_max_frame_pixels >= 1):
            raise ValueError("--video-max-seconds must be in (0, 86400], --video-max-frames and "
                             "--video-max-frame-pixels >= 1")
        if self.video_decoder not in DECODERS:
            raise ValueError(f"--video-decoder must be one of {', '.join(DECODERS)}, got "
                             f"{self.video_decoder!r}")
        if self.video_decode not in VIDEO_DECODES:
            raise ValueError(f"--video-decode must be one of {', '.join(VIDEO_DECODES)}, got "
                             f"{self.video_decode!r}")
        if not -1 <= self.video_threads <= 256:
            raise ValueError(f"--video-threads must be -1 (PyAV's defaults), 0 (FFmpeg's count) "
                             f"or 1..256, got {self.video_threads}")
        parse_networks(self.trusted_router_peers)  # ValueError naming a bad one
        for d in self.allowed_media_dirs:
            if not os.path.isdir(d):
                raise ValueError(f"--allowed-media-dir {d!r} is not a directory")
        return self
