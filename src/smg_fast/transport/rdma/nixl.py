"""NIXL access: the optional import, agent creation, and the metadata exchange.

NIXL's own metadata listener binds every interface, so the exporter serves its agent metadata
itself on the address it is told to use: the client sends ``MAGIC``, the server answers ``MAGIC``,
two little-endian u32 lengths, the agent name and the metadata blob, then closes.
"""

from __future__ import annotations

import importlib
import os
import socket
import struct
from typing import Any

from .errors import RdmaUnavailable

# Wheels that ship NIXL's Python API, in order of preference (the "nixl" meta package last: it
# only switches between the others).
NIXL_MODULES = ("nixl_cu12._api", "nixl_cu13._api", "nixl._api")
MAGIC = b"SMGMETA1"
_LENGTHS = struct.Struct("<II")
_MAX_METADATA = 16 << 20


def load_nixl() -> Any:
    """NIXL's Python API module, or RdmaUnavailable("nixl_unavailable")."""
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")  # NIXL logs every agent event to stdout
    problems = []
    for name in NIXL_MODULES:
        try:
            return importlib.import_module(name)
        except Exception as exc:  # ImportError, or a broken native library
            problems.append(f"{name}: {exc}")
    raise RdmaUnavailable("nixl_unavailable", "NIXL is not installed (pip install --no-deps "
                          "nixl-cu12==1.5.1); tried " + "; ".join(problems))


def make_agent(nixl: Any, name: str) -> Any:
    """A UCX agent with NIXL's progress and listener threads off.

    The progress thread spins a whole core; the listener binds every interface. Callers drive
    progress by polling."""
    try:
        cfg = nixl.nixl_agent_config(enable_prog_thread=False, enable_listen_thread=False,
                                     backends=["UCX"])
        agent = nixl.nixl_agent(name, cfg)
    except Exception as exc:
        raise RdmaUnavailable("agent_failed", f"NIXL agent creation failed: {exc}") from None
    if "UCX" not in getattr(agent, "backends", {}):
        raise RdmaUnavailable("agent_failed", "NIXL has no UCX backend on this machine")
    return agent


def register(agent: Any, addr: int, nbytes: int) -> Any:
    try:
        return agent.register_memory([(addr, nbytes, 0, "")], "DRAM")
    except Exception as exc:
        raise RdmaUnavailable("register_failed",
                              f"registering {nbytes} bytes with NIXL failed: {exc}") from None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed the metadata connection early")
        buf += chunk
    return bytes(buf)


def metadata_answer(name: str, metadata: bytes) -> bytes:
    """The bytes that answer one metadata request."""
    raw = name.encode()
    return MAGIC + _LENGTHS.pack(len(raw), len(metadata)) + raw + metadata


def fetch_metadata(host: str, port: int, timeout_s: float) -> tuple[str, bytes]:
    """(agent name, metadata) of the exporter serving at host:port."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(MAGIC)
        if _recv_exact(sock, len(MAGIC)) != MAGIC:
            raise ConnectionError(f"{host}:{port} is not an smg-fast RDMA exporter")
        n_name, n_md = _LENGTHS.unpack(_recv_exact(sock, _LENGTHS.size))
        if n_name > 4096 or n_md > _MAX_METADATA:
            raise ConnectionError(f"{host}:{port} sent an implausible metadata header")
        return _recv_exact(sock, n_name).decode(), _recv_exact(sock, n_md)
