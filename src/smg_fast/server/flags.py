"""The server's command line.

One source per setting. Each is a CLI flag whose default comes from its environment variable, else
the built-in default shown in ``--help``."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping, Sequence

from .._service.env_flags import Option, add_env_options, env_list
from ..processors import FAMILIES
from .config import ServerConfig
from .models import BACKENDS, split_backend


def parse_model(spec: str) -> tuple[str, str]:
    """Parses a --model spec into its name and source.

    NAME=FAMILY_OR_DIR[:BACKEND], or a bare family / folder (named after itself, without the
    backend). The source keeps its :BACKEND suffix; models.split_backend reads it."""
    spec = spec.strip()
    if not spec:
        raise argparse.ArgumentTypeError("empty --model")
    name, sep, source = spec.partition("=")
    try:
        bare, _ = split_backend(source if sep else spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sep:
        source = spec
        name = os.path.basename(os.path.normpath(bare)) if os.sep in bare else bare
    if not name or not source or not bare:
        raise argparse.ArgumentTypeError(
            f"--model must be NAME=FAMILY_OR_DIR[:BACKEND], got {spec!r}")
    return name, source


# (flag, env var, type, help); defaults come from ServerConfig.
_OPTIONS: list[Option] = [
    ("--host", "SMG_FAST_HOST", str, "address to listen on (gRPC and metrics)"),
    ("--port", "SMG_FAST_PORT", int, "gRPC port (0 = any free port, logged at start)"),
    ("--workers", "SMG_FAST_WORKERS", int,
     "preprocessing worker threads (decode + native core run there, never on the event "
     "loop); default: the CPUs this process may use"),
    ("--max-message-mb", "SMG_FAST_MAX_MESSAGE_MB", int,
     "largest gRPC message in MiB, both directions"),
    ("--pixel-cache-mb", "SMG_FAST_PIXEL_CACHE_MB", int,
     "pixel cache budget in MiB (0 = off)"),
    ("--transport", "SMG_FAST_TRANSPORT", str,
     "transport when a request names none: inline | shm | auto | rdma (rdma: NIXL handles; "
     "an item that cannot go by rdma goes by shm on the same host, else inline)"),
    ("--shm-min-bytes", "SMG_FAST_SHM_MIN_BYTES", int, "tensors smaller than this go inline"),
    ("--shm-pool-mb", "SMG_FAST_SHM_POOL_MB", int,
     "MiB of /dev/shm segments kept created and mapped ahead of demand, so a shm response "
     "does not pay for fresh pages (0 = off; at most a quarter of the tmpfs)"),
    ("--shm-reuse", "SMG_FAST_SHM_REUSE", int,
     "1: deliver shm tensors in segments the server reuses once their consumer has unlinked "
     "the name and closed the file (the tensor at offset 4096; --shm-pool-mb bounds the idle "
     "ones); 0: a new file per tensor, at offset 0 (zero-copy for consumers that map only "
     "offset 0, such as smg's servicer; fresh pages cost the server more). Where file leases "
     "do not work, 0"),
    ("--shm-max-outstanding-mb", "SMG_FAST_SHM_MAX_OUTSTANDING_MB", int,
     "cap on delivered shm segments not yet read, in MiB of tmpfs they take (a reused "
     "segment: its whole size class); one gRPC connection may hold a "
     "quarter of it (shares are per connection: more connections, more shares; per caller "
     "of a --trusted-router-peer). A tensor over the cap goes inline when it fits, else "
     "RESOURCE_EXHAUSTED (0 = half of the smaller of the /dev/shm tmpfs and RAM)"),
    ("--max-image-pixels", "SMG_FAST_MAX_IMAGE_PIXELS", int,
     "reject decoded images with more pixels (0 = no limit); default Pillow's limit"),
    ("--max-output-mb", "SMG_FAST_MAX_OUTPUT_MB", int,
     "largest output of one request in MiB (all its tensors, any transport): a request over "
     "it gets RESOURCE_EXHAUSTED, decided from the image headers before decoding"),
    ("--image-formats", "SMG_FAST_IMAGE_FORMATS", str,
     "comma-separated Pillow formats accepted for encoded images; others get "
     "INVALID_ARGUMENT before any decoder runs (never add EPS: it runs Ghostscript)"),
    ("--metrics-port", "SMG_FAST_METRICS_PORT", int, "Prometheus /metrics port (0 = off)"),
    ("--log-level", "SMG_FAST_LOG_LEVEL", str, "debug | info | warning | error"),
    ("--drain-timeout-s", "SMG_FAST_DRAIN_TIMEOUT_S", float,
     "on SIGTERM/SIGINT: how long to wait for in-flight requests and for consumers to read "
     "delivered shm segments before unlinking them"),
    ("--shm-ttl-s", "SMG_FAST_SHM_TTL_S", float,
     "unlink shm segments no consumer read within this time (0 = keep until shutdown)"),
    ("--rdma-listen-host", "SMG_FAST_RDMA_LISTEN_HOST", str,
     "address the RDMA exporter serves its NIXL metadata on, and advertises in handles "
     "(0.0.0.0 only if you mean every interface)"),
    ("--rdma-listen-port", "SMG_FAST_RDMA_LISTEN_PORT", int,
     "port of the RDMA metadata endpoint (0 = any free port)"),
    ("--rdma-slots", "SMG_FAST_RDMA_SLOTS", int,
     "slots in the RDMA arena (tensors waiting to be pulled at once)"),
    ("--rdma-slot-mb", "SMG_FAST_RDMA_SLOT_MB", float,
     "size of one RDMA slot in MiB; a larger tensor goes by shm/inline; the arena pins slots "
     "x this much memory"),
    ("--rdma-slot-ttl-s", "SMG_FAST_RDMA_SLOT_TTL_S", float,
     "free an RDMA slot this long after it was written if no puller confirmed it; the "
     "default is 3x a puller's default pull timeout"),
    ("--rdma-min-bytes", "SMG_FAST_RDMA_MIN_BYTES", int,
     "tensors smaller than this do not go by rdma"),
    ("--rdma-caller-slots", "SMG_FAST_RDMA_CALLER_SLOTS", int,
     "RDMA slots one caller may hold at once (a caller: the address it connects from, all its "
     "connections together, or a --trusted-router-peer's named caller, as for shm); past it "
     "that caller's items go by shm/inline (fallback reason arena_share), so a caller that "
     "never pulls cannot starve the others (0 = auto: a quarter of --rdma-slots, at least 1)"),
    ("--max-queued-requests", "SMG_FAST_MAX_QUEUED_REQUESTS", int,
     "Preprocess requests admitted at once (running or waiting for a worker); more get "
     "RESOURCE_EXHAUSTED at once (0 = auto: 8 x workers, at least 32)"),
    ("--max-queued-mb", "SMG_FAST_MAX_QUEUED_MB", int,
     "MiB of request messages admitted at once; a request over it gets RESOURCE_EXHAUSTED "
     "unless nothing else is admitted (0 = auto: 1/8 of physical memory, 64..1024 MiB)"),
    ("--max-receiving-per-connection", "SMG_FAST_MAX_RECEIVING_PER_CONNECTION", int,
     "Preprocess calls one connection may have reading their message at once (gRPC buffers "
     "each until it is whole, before admission sees it); the next ones wait, in order, and "
     "meanwhile gRPC takes at most 256 KiB of each. One connection buffers at most this x "
     "--max-message-mb, plus 256 KiB per waiting call"),
    ("--max-receiving", "SMG_FAST_MAX_RECEIVING", int,
     "Preprocess calls all connections together may have reading their message at once; the "
     "next ones wait, in order, as past --max-receiving-per-connection. The server buffers "
     "at most this x --max-message-mb of messages still arriving, whatever the number of "
     "connections (0 = auto: as many --max-message-mb messages as --max-queued-mb holds, at "
     "least --max-receiving-per-connection)"),
    ("--stream-window-kb", "SMG_FAST_STREAM_WINDOW_KB", int,
     "HTTP/2 window of a call's stream (BDP probing is off): what gRPC takes of a message "
     "before its call reads it, and so what one upload sends per round trip. 256 KiB suits a "
     "cluster's round trips (over 1 GiB/s at 0.2 ms); over a WAN raise it (uploads of large "
     "messages speed up) at the cost of that much more memory per call waiting for a place"),
    ("--receive-timeout-s", "SMG_FAST_RECEIVE_TIMEOUT_S", float,
     "a Preprocess call whose message has not all arrived this long after the call began "
     "(waiting included) ends RESOURCE_EXHAUSTED, and what gRPC buffered of it is dropped (a "
     "client that sends part of a large message and stalls holds memory no longer)"),
    ("--max-decode-mb", "SMG_FAST_MAX_DECODE_MB", int,
     "MiB of images and videos being decoded at once, planned from each item's header before "
     "it is decoded (width x height x 4 bytes per full-size copy an image's decoder makes; a "
     "video's sampled frames and the codec's reference frames) and held for "
     "its decode only (a pixel cache hit takes none); an item that does not fit waits its "
     "turn (--decode-wait-s), then its request gets RESOURCE_EXHAUSTED; one larger than the "
     "budget decodes when nothing else does (0 = auto: a quarter of physical memory or of "
     "the cgroup's memory limit, at least 256 MiB)"),
    ("--decode-wait-s", "SMG_FAST_DECODE_WAIT_S", float,
     "longest an item waits, in order of arrival, for room in --max-decode-mb (bounded "
     "also by the request's deadline) before its request gets RESOURCE_EXHAUSTED"),
    ("--single-flight-wait-s", "SMG_FAST_SINGLE_FLIGHT_WAIT_S", float,
     "pixel cache: longest wait for another request computing the same image (bounded "
     "also by the request's deadline); then the waiter computes it itself"),
    ("--video-max-seconds", "SMG_FAST_VIDEO_MAX_SECONDS", float,
     "video items: longest video accepted, from its header's duration or frames / fps "
     "(INVALID_ARGUMENT before any frame is decoded)"),
    ("--video-max-frames", "SMG_FAST_VIDEO_MAX_FRAMES", int,
     "video items: most frames a header may declare (or its packets count) before decoding"),
    ("--video-max-frame-pixels", "SMG_FAST_VIDEO_MAX_FRAME_PIXELS", int,
     "video items: most pixels in one frame (width x height from the header; sides at most "
     "8192)"),
    ("--video-threads", "SMG_FAST_VIDEO_THREADS", int,
     "FFmpeg decoder threads per video: -1 PyAV's defaults (slice threads, as transformers' "
     "loader runs), 0 FFmpeg's count with frame threads, n that many (each video item "
     "decodes on one worker; frame threads add one held frame each to its decode budget)"),
    ("--video-decoder", "SMG_FAST_VIDEO_DECODER", str,
     "whose frames a video item gets unless its VideoOptions.decoder names one: pyav "
     "(transformers' load_video), torchcodec (transformers' processors given a path; SGLang), "
     "opencv (vLLM)"),
    ("--video-decode", "SMG_FAST_VIDEO_DECODE", str,
     "video items: skip (non-reference frames that sampling drops are not decoded: the same "
     "frames on valid streams, faster) or full (every frame up to the last sampled one, as "
     "transformers' loader: also exact on damaged streams, whose concealment follows every "
     "frame decoded, at --video-threads -1)"),
]


def _bytes_to_mib(raw: str) -> float:
    return int(raw) / 2**20


_bytes_to_mib.unit = "int"  # type: ignore[attr-defined]  (what an invalid value is called)


# The upstream smg gateway's names for the same settings, still read (the SMG_FAST_ name wins
# when both are set), with the conversion from the alias's unit to the flag's.
ALIASES: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "SMG_FAST_PIXEL_CACHE_MB": ("SMG_MM_PIXEL_CACHE_MB", None),
    "SMG_FAST_TRANSPORT": ("SMG_MM_TENSOR_TRANSPORT", None),
    "SMG_FAST_SHM_MIN_BYTES": ("SMG_MM_SHM_MIN_BYTES", None),
    "SMG_FAST_RDMA_LISTEN_HOST": ("SMG_RDMA_LISTEN_IP", None),
    "SMG_FAST_RDMA_LISTEN_PORT": ("SMG_RDMA_LISTEN_PORT", None),
    "SMG_FAST_RDMA_SLOTS": ("SMG_RDMA_POOL_SLOTS", None),
    "SMG_FAST_RDMA_SLOT_TTL_S": ("SMG_RDMA_SLOT_TTL_S", None),
    "SMG_FAST_RDMA_SLOT_MB": ("SMG_RDMA_SLOT_BYTES", _bytes_to_mib),  # bytes there
}


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    base = ServerConfig()
    ap = argparse.ArgumentParser(
        prog="python -m smg_fast.server",
        description="smg-fast encode-stage service: raw images in over gRPC, exact VLM encoder "
                    "inputs out (inline, /dev/shm or RDMA handles). Every option can also be "
                    "set by the environment variable shown; the flag wins.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_env_options(ap, _OPTIONS, base, env, ALIASES)
    env_models = env_list(env, "SMG_FAST_MODELS")
    ap.add_argument(
        "--model", dest="models", action="append", type=parse_model,
        default=argparse.SUPPRESS,
        metavar="NAME=FAMILY_OR_DIR[:BACKEND]",
        help=f"a processor to load: NAME={'|'.join(FAMILIES)} or "
             "NAME=/path/to/hf_model_folder (repeatable; the first is the default); "
             f"optional :BACKEND ({'|'.join(BACKENDS)}) picks the reference reproduced "
             "(default: a folder's named class, as transformers' Auto classes resolve it "
             "with torchvision installed, as in vLLM and SGLang; a family name: pil for Qwen, "
             "upstream for Kimi) "
             "[env SMG_FAST_MODELS, comma-separated] (default: qwen2_vl=qwen2_vl)")
    ap.add_argument(
        "--allowed-media-dir", dest="allowed_media_dirs", action="append",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="directory whose files requests may name by path or file:// URL (repeatable; "
             "none = file URLs disabled) [env SMG_FAST_ALLOWED_MEDIA_DIRS, "
             f"'{os.pathsep}'-separated]")
    ap.add_argument(
        "--trusted-router-peer", dest="trusted_router_peers", action="append",
        default=argparse.SUPPRESS, metavar="ADDR",
        help="IP address or network (10.0.0.5, 10.0.0.0/24, ::1) of an smg-fast router: a "
             "request from there naming its caller in smg-fast-caller metadata counts against "
             "that caller's shm share instead of the router connection's (repeatable; none = "
             "the metadata is ignored). Anyone who can connect from such an address can claim "
             "as many shares as it likes (the total cap still holds) "
             "[env SMG_FAST_TRUSTED_ROUTER_PEERS, comma-separated]")
    ap.set_defaults(_env_models=env_models,
                    _env_dirs=[d for d in env.get("SMG_FAST_ALLOWED_MEDIA_DIRS", "")
                               .split(os.pathsep) if d],
                    _env_routers=env_list(env, "SMG_FAST_TRUSTED_ROUTER_PEERS"))
    return ap


def _slot_bytes(ap: argparse.ArgumentParser, mib: float) -> int:
    if not math.isfinite(mib) or mib <= 0:
        ap.error(f"--rdma-slot-mb must be a positive finite number, got {mib}")
    return int(mib * 2**20)


def config_from_args(argv: Sequence[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> ServerConfig:
    ap = build_parser(environ)
    ns = ap.parse_args(argv)
    models = getattr(ns, "models", None)
    if models is None:
        try:
            models = [parse_model(s) for s in ns._env_models] or ServerConfig().models
        except argparse.ArgumentTypeError as exc:
            ap.error(f"SMG_FAST_MODELS: {exc}")
    dirs = getattr(ns, "allowed_media_dirs", None)
    dirs = ns._env_dirs if dirs is None else dirs
    routers = getattr(ns, "trusted_router_peers", None)
    cfg = ServerConfig(
        host=ns.host, port=ns.port, models=models, workers=ns.workers,
        max_message_mb=ns.max_message_mb, pixel_cache_mb=ns.pixel_cache_mb,
        transport=ns.transport, shm_min_bytes=ns.shm_min_bytes,
        allowed_media_dirs=[os.path.abspath(d) for d in dirs],
        max_image_pixels=ns.max_image_pixels, metrics_port=ns.metrics_port,
        log_level=ns.log_level.lower(), drain_timeout_s=ns.drain_timeout_s,
        shm_ttl_s=ns.shm_ttl_s, shm_pool_mb=ns.shm_pool_mb, shm_reuse=ns.shm_reuse,
        shm_max_outstanding_mb=ns.shm_max_outstanding_mb,
        rdma_listen_host=ns.rdma_listen_host, rdma_listen_port=ns.rdma_listen_port,
        rdma_slots=ns.rdma_slots, rdma_slot_bytes=_slot_bytes(ap, ns.rdma_slot_mb),
        rdma_slot_ttl_s=ns.rdma_slot_ttl_s, rdma_min_bytes=ns.rdma_min_bytes,
        rdma_caller_slots=ns.rdma_caller_slots,
        max_output_mb=ns.max_output_mb, image_formats=ns.image_formats,
        max_queued_requests=ns.max_queued_requests, max_queued_mb=ns.max_queued_mb,
        max_decode_mb=ns.max_decode_mb, decode_wait_s=ns.decode_wait_s,
        max_receiving_per_connection=ns.max_receiving_per_connection,
        max_receiving=ns.max_receiving, receive_timeout_s=ns.receive_timeout_s,
        stream_window_kb=ns.stream_window_kb,
        single_flight_wait_s=ns.single_flight_wait_s,
        video_max_seconds=ns.video_max_seconds, video_max_frames=ns.video_max_frames,
        video_max_frame_pixels=ns.video_max_frame_pixels, video_threads=ns.video_threads,
        video_decoder=ns.video_decoder, video_decode=ns.video_decode,
        trusted_router_peers=ns._env_routers if routers is None else routers,
    )
    try:
        return cfg.validate()
    except ValueError as exc:
        ap.error(str(exc))
    raise AssertionError("unreachable")
