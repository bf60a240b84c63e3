"""The server's overlapped JPEG decode into an RDMA slot, with real NIXL.

Decoded inside the native call that writes the RDMA slot, server in process: exact through a slot; a
lease lost after its write (the commit refused) falls back to shm with a fresh decode, since a
planned batch is consumed by one write; a decode error gives its slot back. The inline / shm side is
in test_server_jpeg_overlap.py."""

from __future__ import annotations

import io
import time

import grpc
import pytest
from PIL import Image
from support.hf_oracle import hf_call
from support.images import encode
from support.outputs import assert_arrays_equal
from support.rdma_common import MiB  # skips this module when NIXL is not installed

from smg_fast.client import Client
from smg_fast.processors.batch import PlannedBatch
from smg_fast.transport.rdma import ExportRefused
from smg_fast.transport.rdma.exporter import ExportLease

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def server_fields() -> dict:
    """The module's `server` (tests/conftest.py): the rdma transport, two 32 MiB slots.

    One caller may hold both (per-caller shares: test_rdma_caller_shares.py)."""
    return dict(models=[("qwen2_vl", "qwen2_vl")], transport="rdma", rdma_slots=2,
                rdma_slot_bytes=32 * MiB, rdma_caller_slots=2)


def slots_in_use(server) -> int:
    return server.server.rdma.exporter.arena.in_use


def settled(server, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while slots_in_use(server) and time.monotonic() < deadline:
        time.sleep(0.01)
    return slots_in_use(server) == 0


def transformers(hf_qwen, data: bytes):
    return hf_call(hf_qwen("qwen2_vl"), [Image.open(io.BytesIO(data))])[0]


def test_exact_through_a_slot(server, puller, photo_720p, hf_qwen, overlapped):
    data = encode(photo_720p, "JPEG", quality=90)
    with Client(server.target, puller=puller, timeout=30) as c:
        out = c.preprocess(data, transport="rdma")
    assert out.items[0].transport == "rdma"
    assert_arrays_equal(out.pixel_values, transformers(hf_qwen, data))
    assert overlapped == [True]
    assert settled(server)


def test_a_lease_lost_after_its_write_falls_back_with_a_fresh_decode(server, puller, photo_720p,
                                                                     hf_qwen, overlapped,
                                                                     monkeypatch):
    data = encode(photo_720p, "JPEG", quality=91)
    real_commit, refused = ExportLease.commit, []

    def commit(self):
        if not refused:  # the first lease: as if its TTL ran out while it was written
            refused.append(self.key)
            self.abort()
            raise ExportRefused("lease_expired", "the lease expired while it was written")
        return real_commit(self)

    monkeypatch.setattr(ExportLease, "commit", commit)
    writes = []  # (wall seconds, decode seconds) of each write
    real_write = PlannedBatch.write_into

    def write_into(self, out):
        t0 = time.perf_counter()
        try:
            return real_write(self, out)
        finally:
            writes.append((time.perf_counter() - t0, self.decode_seconds))

    monkeypatch.setattr(PlannedBatch, "write_into", write_into)
    reg = server.server.metrics.registry

    def sums() -> tuple[float, float]:
        return (reg.get_sample_value("smg_fast_decode_seconds_sum") or 0,
                reg.get_sample_value("smg_fast_preprocess_seconds_sum") or 0)

    before = sums()
    with Client(server.target, puller=puller, timeout=30) as c:
        out = c.preprocess(data, transport="rdma")
    assert refused and out.items[0].transport == "shm"
    assert_arrays_equal(out.pixel_values, transformers(hf_qwen, data))
    assert overlapped == [True, True]  # written twice: each write decoded its own header
    # Both writes are accounted for: their decodes as decoding, the rest as preprocessing.
    decoded, preprocessed = (b - a for a, b in zip(before, sums(), strict=True))
    assert len(writes) == 2 and decoded == pytest.approx(sum(d for _, d in writes), abs=1e-9)
    assert preprocessed >= sum(w - d for w, d in writes) - 1e-6
    assert reg.get_sample_value("smg_fast_fallback_total",
                                {"reason": "lease_expired", "used": "shm"}) >= 1
    assert settled(server)


def test_a_decode_error_gives_the_slot_back(server, puller, photo_720p, overlapped):
    data = encode(photo_720p, "JPEG", quality=92)
    with Client(server.target, puller=puller, timeout=30) as c:
        for cut in (0.2, 0.9):
            with pytest.raises(grpc.RpcError) as info:
                c.preprocess(data[: int(len(data) * cut)], transport="rdma")
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert info.value.details().startswith("item 0:"), info.value.details()
            assert slots_in_use(server) == 0  # aborted before the error was returned
        assert c.preprocess(data, transport="rdma").items[0].transport == "rdma"
    assert overlapped == [False, False, True]
    assert settled(server)
