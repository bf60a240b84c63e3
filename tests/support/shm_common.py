"""Helpers of the shm tests (transport/test_shm_*.py): requests, waits, own channels.

Their tmpfs and /dev/shm directory fixtures are in tests/transport/conftest.py.
"""

from __future__ import annotations

import os
import time

import grpc

from smg_fast.client import build_request
from smg_fast.transport import shm
from support.images import encode


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def chelsea_png(real_images) -> bytes:
    return encode(real_images.rgb("chelsea"), "PNG")


def own_channel(target: str, max_mb: int = 256) -> grpc.Channel:
    """A gRPC channel on its own connection.

    gRPC shares connections between channels with equal arguments in one process; the server counts
    shm shares per connection."""
    limit = max_mb << 20
    return grpc.insecure_channel(target, options=[
        ("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit)])


def shm_call(stub, data: bytes, namespace: str, transport: str = "shm"):
    return stub.Preprocess(build_request(data, transport=transport, namespace=namespace),
                           timeout=60)


def dir_bytes(d: str) -> int:
    return sum(e.stat().st_size for e in os.scandir(d) if shm.is_segment_name(e.name))
