"""Shared by the RDMA test files: importing it skips the importing module when NIXL is not
installed (checked without importing NIXL, so its libraries stay out of this process until a test
needs them) or grpc is missing; and the exporter-peer and puller fixtures."""

from __future__ import annotations

import importlib.util

import pytest

from smg_fast.transport.rdma.nixl import NIXL_MODULES

if not any(importlib.util.find_spec(m.split(".")[0]) for m in NIXL_MODULES):
    pytest.skip("NIXL is not installed (pip install --no-deps nixl-cu12==1.5.1)",
                allow_module_level=True)

pytest.importorskip("grpc")

from smg_fast.bench.rdma_peer import PeerProcess  # noqa: E402
from smg_fast.transport.rdma import Puller  # noqa: E402

MiB = 1 << 20


@pytest.fixture
def peers():
    started: list[PeerProcess] = []

    def factory(**opts: object) -> PeerProcess:
        p = PeerProcess(**opts)
        started.append(p)
        return p

    yield factory
    for p in started:
        p.close()


@pytest.fixture(scope="module")
def puller():
    with Puller(slots=4, slot_bytes=32 * MiB, timeout_s=10) as p:
        yield p
