"""Fixtures of the server tests: a client of the module's server.

`server` itself is in tests/conftest.py, shared with the transport tests.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client(server):
    """A Client of the module's server (60 s per call)."""
    from smg_fast.client import Client

    with Client(server.target, timeout=60) as c:
        yield c
