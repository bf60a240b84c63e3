"""Clients of the smg-fast service (needs the ``server`` extra).

    from smg_fast.client import Client
    with Client("127.0.0.1:50051") as c:
        out = c.preprocess(["photo.jpg", jpeg_bytes], dtype="bfloat16")
        out.pixel_values, out.image_grid_thw, out.items[0].cache_hit

``AsyncClient`` has the same methods as coroutines. Images are bytes (sent as is), paths (read
here and sent as bytes) or URL strings (``data:...``, ``file://...``: resolved by the server).
The default transport ``auto`` gets /dev/shm handles when client and server share /dev/shm and
inline bytes otherwise; either way the arrays come back materialized (shm segments are mapped
and unlinked). Videos (encoded containers) are given the same ways, with ``videos=`` and their
sampling options in ``videos_kwargs`` (``fps``, ``num_frames``, ...):

        out = c.preprocess(videos=[mp4_bytes], videos_kwargs={"fps": 2})
        out.pixel_values_videos, out.video_grid_thw, out.video_metadata

    python -m smg_fast.client IMAGE... [--video VIDEO --fps 2] --target host:port
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ._proto import preprocessor_pb2 as pb
from ._proto import preprocessor_pb2_grpc as pb_grpc
from ._service.channel import message_size_options
from ._service.video_options import call_options
from .client_messages import (  # noqa: F401 - the request/response helpers are public here too
    VIDEO_OPTIONS,
    PreprocessedImage,
    PreprocessResult,
    _media_item,
    build_request,
    read_response,
    video_options,
)
from .compact import CompactTensor, expand
from .errors import InvalidVideoError
from .transport.tensors import shm_namespace
from .video.convert import DECODERS

DEFAULT_TARGET = "127.0.0.1:50051"


def _info_dict(msg: Any) -> dict[str, Any]:
    """A message as a plain dict (ints stay ints, repeated messages become lists of dicts)."""
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.message_type is not None:
            if f.is_repeated:
                out[f.name] = [_info_dict(v) for v in value]
            else:
                out[f.name] = _info_dict(value)
        else:
            out[f.name] = list(value) if f.is_repeated else value
    return out


class _ClientBase:
    _channel_factory: Any = None  # grpc.insecure_channel or grpc.aio.insecure_channel

    def __init__(self, target: str = DEFAULT_TARGET, *, max_message_mb: int = 256,
                 timeout: float | None = None, puller: Any = None) -> None:
        """``timeout`` (seconds) applies to every call unless overridden.

        ``puller``: the :class:`smg_fast.transport.rdma.Puller` for transport "rdma" (default: the
        process-wide one, created on first use)."""
        self.target = target
        self.timeout = timeout
        self.puller = puller
        self.namespace = shm_namespace()
        self._channel = self._channel_factory(
            target, options=message_size_options(max_message_mb * 2**20))
        self._stub = pb_grpc.PreprocessorStub(self._channel)

    def _request(self, images: Any, model: str | None, dtype: str, transport: str,
                 min_pixels: int | None, max_pixels: int | None,
                 request_id: str | None, encoding: str = "", videos: Any = None,
                 videos_kwargs: dict[str, Any] | None = None) -> pb.PreprocessRequest:
        """The PreprocessRequest both clients send (with this host's shm namespace)."""
        return build_request(images, model=model, dtype=dtype, transport=transport,
                             min_pixels=min_pixels, max_pixels=max_pixels,
                             request_id=request_id, namespace=self.namespace,
                             encoding=encoding, videos=videos, videos_kwargs=videos_kwargs)


class Client(_ClientBase):
    """Synchronous client. ``timeout`` (seconds) applies to every call unless overridden."""

    _channel_factory = staticmethod(grpc.insecure_channel)

    def preprocess(self, images: Any = None, model: str | None = None, dtype: str = "float32",
                   transport: str = "auto", *, min_pixels: int | None = None,
                   max_pixels: int | None = None, request_id: str | None = None,
                   as_torch: bool = False, timeout: float | None = None,
                   encoding: str = "", expand: bool = False, videos: Any = None,
                   videos_kwargs: dict[str, Any] | None = None) -> PreprocessResult:
        """Raises grpc.RpcError with the server's status code and message on failure.

        ``encoding="uint8+lut"``: the compact exact format on the wire; each item's pixel_values
        is then a CompactTensor (``smg_fast.expand`` it), or with ``expand`` the dtype's tensor.
        ``videos``: encoded videos (bytes, paths, file:// URLs) sent after the images, sampled
        with ``videos_kwargs`` (``fps``, ``num_frames``, ``do_sample_frames``, ``min_frames``,
        ``max_frames``, ``min_pixels``, ``max_pixels``; unset: the model's; ``decoder``: whose
        frames, ``pyav`` unless set)."""
        req = self._request(images, model, dtype, transport, min_pixels, max_pixels, request_id,
                            encoding, videos, videos_kwargs)
        t0 = time.perf_counter()
        resp = self._stub.Preprocess(req, timeout=timeout or self.timeout)
        out = read_response(resp, as_torch=as_torch, puller=self.puller, expand=expand)
        out.latency_s = time.perf_counter() - t0
        return out

    def model_info(self, timeout: float | None = None) -> dict[str, Any]:
        return _info_dict(self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                                  timeout=timeout or self.timeout))

    def health(self, service: str = "", timeout: float | None = None) -> str:
        """"SERVING", "NOT_SERVING", ... of the server (or one of its services)."""
        stub = health_pb2_grpc.HealthStub(self._channel)
        resp = stub.Check(health_pb2.HealthCheckRequest(service=service),
                          timeout=timeout or self.timeout or 10)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(_ClientBase):
    """asyncio client (grpc.aio); create it inside the event loop that uses it."""

    _channel_factory = staticmethod(grpc.aio.insecure_channel)

    async def preprocess(self, images: Any = None, model: str | None = None, dtype: str = "float32",
                         transport: str = "auto", *, min_pixels: int | None = None,
                         max_pixels: int | None = None, request_id: str | None = None,
                         as_torch: bool = False, timeout: float | None = None,
                         encoding: str = "", expand: bool = False, videos: Any = None,
                         videos_kwargs: dict[str, Any] | None = None) -> PreprocessResult:
        """Client.preprocess, awaited."""
        req = self._request(images, model, dtype, transport, min_pixels, max_pixels, request_id,
                            encoding, videos, videos_kwargs)
        t0 = time.perf_counter()
        resp = await self._stub.Preprocess(req, timeout=timeout or self.timeout)
        if any(it.pixel_values.WhichOneof("payload") == "remote" for it in resp.items):
            out = await asyncio.to_thread(read_response, resp, as_torch=as_torch,
                                          puller=self.puller, expand=expand)  # READs off the loop
        else:
            out = read_response(resp, as_torch=as_torch, expand=expand)
        out.latency_s = time.perf_counter() - t0
        return out

    async def model_info(self, timeout: float | None = None) -> dict[str, Any]:
        return _info_dict(await self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                                        timeout=timeout or self.timeout))

    async def health(self, service: str = "", timeout: float | None = None) -> str:
        stub = health_pb2_grpc.HealthStub(self._channel)
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service),
                                timeout=timeout or self.timeout or 10)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


# ------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------


def _verify(info: dict[str, Any], model: str | None, image: str | bytes, dtype: str,
            got: np.ndarray) -> str:
    """A line saying how the served result compares with local references.

    Compares with the in-process processor of the server's config and backend, and (float32) with
    transformers' processor for that backend where it can run here."""
    from . import load_processor
    from .processors.reference import reference_pixel_values

    name = model or info.get("default_model", "")
    spec = next((m for m in info.get("models", []) if m.get("name") == name), None)
    if spec is None:
        return "verify skipped: unknown model"
    try:
        proc = load_processor(spec["source"], backend=spec.get("backend") or None)
    except (ValueError, TypeError, OSError):
        return "verify skipped: the server's model folder is not readable here"
    if proc.config.fingerprint != spec.get("config_fingerprint"):
        return "verify skipped: local config differs from the server's"
    ref = proc(image, dtype=dtype)["pixel_values"]
    backend = proc.config.backend
    line = (f"identical to in-process ({backend})" if np.array_equal(ref, got) else
            f"DIFFERS from in-process ({backend})")
    if dtype != "float32":
        return line + "; transformers compared at --dtype float32 only"
    hf, why = reference_pixel_values(proc.config, image)
    if hf is None:
        return f"{line}; transformers not compared: {why}"
    same = np.array_equal(hf, got)
    return f"{line}; {'bit-exact with' if same else 'DIFFERS from'} transformers ({backend})"


def _verify_video(info: dict[str, Any], model: str | None, video: str | bytes, dtype: str,
                  options: dict[str, Any], got: np.ndarray, meta: dict[str, Any] | None) -> str:
    """A line saying how a served video compares with the in-process video processor.

    The local one is made from the server's model source (a family name or a folder readable
    here) and called with the options the server derives from the request's VideoOptions."""
    from .processors.loader import load_video_processor

    name = model or info.get("default_model", "")
    spec = next((m for m in info.get("models", []) if m.get("name") == name), None)
    if spec is None:
        return "verify skipped: unknown model"
    if isinstance(video, str) and not os.path.isfile(video):
        return "verify skipped: the video is not a file here"
    try:  # every frame decoded up to the last sampled one: the reference loader's frames
        vp = load_video_processor(spec["source"], skip=False)
    except (ValueError, TypeError, OSError):
        return "verify skipped: the server's model folder is not readable here"
    if meta is not None and meta.get("decoder") and "decoder" not in options:
        options = {**options, "decoder": meta["decoder"]}  # the server's default decoder
    try:
        ref = vp(video, dtype=dtype, return_metadata=True, **options)
    except InvalidVideoError as exc:
        return f"DIFFERS from in-process (video): there it raised {type(exc).__name__}: {exc}"
    same = np.array_equal(ref["pixel_values_videos"], got)
    idx = list(ref["video_metadata"][0]["frames_indices"])
    if meta is not None and meta["frames_indices"] != idx:
        same = False
    return ("identical to in-process (video)" if same else "DIFFERS from in-process (video)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m smg_fast.client",
        description="Send images (and videos) to an smg-fast server and print what comes back "
                    "per item: shape, grid, tokens, cache hit, transport, latency.")
    ap.add_argument("images", nargs="*", help="image files (sent as bytes), or data:/file:// "
                                              "URLs (resolved by the server)")
    ap.add_argument("--video", action="append", default=[], metavar="VIDEO",
                    help="a video file (sent as bytes) or file:// URL; repeatable")
    ap.add_argument("--fps", type=float, default=None,
                    help="videos: frames kept per second (default: the model's)")
    ap.add_argument("--num-frames", type=int, default=None,
                    help="videos: frames kept (instead of --fps)")
    ap.add_argument("--decoder", default=None, choices=DECODERS,
                    help="videos: whose frames (default: pyav, transformers' load_video's; "
                         "torchcodec: its processors' for a path, SGLang's; opencv: vLLM's)")
    ap.add_argument("--test-pattern", action="store_true",
                    help="also send a built-in 1920x1080 JPEG test pattern (no image needed)")
    ap.add_argument("--target", default=os.environ.get("SMG_FAST_TARGET", DEFAULT_TARGET),
                    help="server host:port [env SMG_FAST_TARGET] (default %(default)s)")
    ap.add_argument("--model", default=None, help="model name (default: the server's)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--encoding", default="", choices=["", "uint8+lut"],
                    help="'uint8+lut': the compact exact format (uint8 patches + the dtype's "
                         "table, expanded here); '' = plain dtype (default)")
    ap.add_argument("--transport", default="auto",
                    choices=["", "inline", "shm", "auto", "rdma"],
                    help="'' = the server's default (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=1, help="requests per image (each printed)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    ap.add_argument("--info", action="store_true", help="print the server's models and "
                                                        "settings")
    ap.add_argument("--verify", action="store_true",
                    help="compare with the in-process processor of the server's config and "
                         "backend and, for float32, with transformers' processor for that "
                         "backend where it runs here (torchvision needs torchvision); a "
                         "video with the in-process video processor of the server's model "
                         "(same frames kept, same pixel_values_videos); exit status 1 when "
                         "any differs")
    args = ap.parse_args(argv)
    if not args.images and not args.info and not args.test_pattern and not args.video:
        ap.error("give image files, --video files, --test-pattern, or --info")
    images: list[tuple[str, Any]] = [(str(i), i) for i in args.images]
    videos_kwargs = {k: v for k, v in (("fps", args.fps), ("num_frames", args.num_frames),
                                       ("decoder", args.decoder)) if v is not None}
    try:
        options = call_options(video_options(videos_kwargs))
    except ValueError as exc:
        ap.error(str(exc))
    if args.test_pattern:
        from .imaging.sample import sample_image_bytes

        images.append(("test-pattern 1920x1080 JPEG", sample_image_bytes()))
    status = 0
    with Client(args.target, timeout=args.timeout) as client:
        try:
            wanted = args.info or args.verify or args.transport == "rdma"
            info = client.model_info() if wanted else {}
        except grpc.RpcError as exc:
            print(f"error: {args.target}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
        if info.get("rdma_available") and args.transport == "rdma":
            from .transport.rdma import Puller, RdmaError

            try:  # made before the first timed request, with slots the server's tensors fit
                client.puller = Puller(slots=1, slot_bytes=int(info["rdma_max_bytes"]) + 4096)
            except (RdmaError, ValueError) as exc:
                print(f"error: cannot pull rdma handles here: {exc}", file=sys.stderr)
                return 1
        if args.info:
            import json

            print(json.dumps(info, indent=2))
        sends = [(label, image, False) for label, image in images]
        sends += [(str(v), v, True) for v in args.video]
        for label, image, is_video in sends:
            for _ in range(max(1, args.repeat)):
                try:
                    if is_video:
                        out = client.preprocess(videos=image, videos_kwargs=videos_kwargs,
                                                model=args.model, dtype=args.dtype,
                                                transport=args.transport)
                    else:
                        out = client.preprocess(image, model=args.model, dtype=args.dtype,
                                                transport=args.transport, encoding=args.encoding)
                except grpc.RpcError as exc:
                    print(f"{label}: {exc.code().name}: {exc.details()}", file=sys.stderr)
                    status = 1
                    break
                except (OSError, ValueError, RuntimeError) as exc:  # files, handles, RdmaError
                    print(f"{label}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    status = 1
                    break
                it = out.items[0]
                px = it.pixel_values
                fmt = args.dtype
                if isinstance(px, CompactTensor):  # verified as the tensor it stands for
                    fmt = f"{args.dtype} as uint8+lut ({px.nbytes} bytes)"
                    px = expand(px)
                what = "pixel_values_videos" if is_video else "pixel_values"
                line = (f"{label}: {what} {tuple(px.shape)} {fmt} grid_thw "
                        f"{list(it.grid_thw)} tokens {it.num_tokens} cache_hit "
                        f"{str(it.cache_hit).lower()} transport {it.transport} "
                        f"{out.latency_s * 1e3:.2f} ms (server {out.timings['total_us'] / 1e3:.2f}"
                        " ms)")
                if is_video:
                    line += f" frames {it.video['frames_indices']}"
                if args.verify and is_video:
                    local = image[7:] if image.startswith("file://") else image
                    verdict = _verify_video(info, args.model, local, args.dtype, options, px,
                                            it.video)
                    line += " | " + verdict
                    status = 1 if "DIFFERS" in verdict else status
                elif args.verify and not (isinstance(image, str)
                                          and image.startswith(("data:", "file:"))):
                    verdict = _verify(info, args.model, image, args.dtype, px)
                    line += " | " + verdict
                    status = 1 if "DIFFERS" in verdict else status
                print(line, flush=True)
        if client.puller is not None:
            client.puller.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
