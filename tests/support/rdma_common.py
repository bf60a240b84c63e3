"""Imported first by the RDMA test files: skips the importing module without NIXL or grpc.

NIXL is looked for without importing it, so its libraries stay out of this process until a test
needs them. The RDMA fixtures are in tests/transport/conftest.py.
"""

from __future__ import annotations

import importlib.util

import pytest

from smg_fast.transport.rdma.nixl import NIXL_MODULES

if not any(importlib.util.find_spec(m.split(".")[0]) for m in NIXL_MODULES):
    pytest.skip("NIXL is not installed (pip install --no-deps nixl-cu12==1.5.1)",
                allow_module_level=True)

pytest.importorskip("grpc")

MiB = 1 << 20
