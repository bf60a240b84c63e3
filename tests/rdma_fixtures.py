"""Fixtures of the RDMA test files, loaded with ``pytest_plugins = ["rdma_fixtures"]`` (not
imported by name, so pytest can rewrite its asserts and no test signature shadows an import)."""

from __future__ import annotations

import pytest

from smg_fast.testing.rdma_peer import PeerProcess
from smg_fast.transport.rdma import Puller


@pytest.fixture
def peers():
    """peers(**opts): an exporter in a child process (smg_fast.testing.rdma_peer), closed after
    the test."""
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
    with Puller(slots=4, slot_bytes=32 << 20, timeout_s=10) as p:
        yield p
