"""``python -m smg_fast.transport.rdma.preflight``.

Checks in a throw-away process that NIXL imports, makes a UCX agent and registers memory. The server
runs it before touching NIXL itself, so a broken install (a missing library, an abort inside UCX)
disables the RDMA lane instead of the process. Prints one JSON line: {"ok": true} or {"ok": false,
"reason": ..., "detail": ...}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np


def _check() -> dict[str, object]:
    from .errors import RdmaUnavailable
    from .nixl import load_nixl, make_agent, register

    try:
        nixl = load_nixl()
        agent = make_agent(nixl, f"smg-fast-preflight-{os.getpid()}")
        buf = np.zeros(1 << 20, dtype=np.uint8)
        reg = register(agent, buf.ctypes.data, buf.nbytes)
        agent.deregister_memory(reg)
    except RdmaUnavailable as exc:
        return {"ok": False, "reason": exc.reason, "detail": exc.detail}
    return {"ok": True}


def run_preflight(timeout_s: float = 60.0) -> tuple[str | None, str]:
    """(None, "") when the lane can start, else (fallback reason, detail)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "smg_fast.transport.rdma.preflight"],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "agent_failed", f"NIXL preflight did not finish in {timeout_s:.0f} s"
    except (OSError, ValueError) as exc:  # cannot spawn, or output that is not text
        return "agent_failed", f"NIXL preflight could not run: {exc}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return "agent_failed", (f"NIXL preflight exited with {proc.returncode}: "
                                + " | ".join(tail))
    try:
        result = json.loads(lines[-1])
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return "agent_failed", f"NIXL preflight printed a malformed line: {lines[-1][:200]!r}"
    if result.get("ok") is True:
        return None, ""
    return str(result.get("reason", "agent_failed")), str(result.get("detail", ""))


def main() -> None:
    print(json.dumps(_check()), flush=True)


if __name__ == "__main__":
    main()
