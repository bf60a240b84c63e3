"""The GetModelInfo answer of a server: its models and its transport settings."""

from __future__ import annotations

from .._proto import preprocessor_pb2 as pb
from .._version import __version__
from .config import ServerConfig
from .models import ModelSet


def model_info(config: ServerConfig, models: ModelSet, namespace: str,
               cache_bytes: int) -> bytes:
    """The serialized GetModelInfoResponse (without the RDMA lane's fields, added when it is up)."""
    out = pb.GetModelInfoResponse(
        default_model=models.default, shm_namespace=namespace,
        default_transport=config.transport, shm_min_bytes=config.shm_min_bytes,
        max_message_bytes=config.max_message_bytes, pixel_cache_bytes=cache_bytes,
        version=__version__)
    for m in models.models.values():
        c = m.proc.config
        out.models.add(name=m.name, family=c.family, config_fingerprint=m.fingerprint,
                       patch_size=c.patch_size, merge_size=c.merge_size,
                       temporal_patch_size=c.temporal_patch_size, default_dtype="float32",
                       min_pixels=c.min_pixels or 0, max_pixels=c.max_pixels or 0,
                       max_image_pixels=c.max_image_pixels or 0, source=m.source,
                       backend=c.backend, takes_video=m.takes_video)
    return out.SerializeToString()
