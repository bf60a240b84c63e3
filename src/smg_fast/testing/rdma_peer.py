"""A stand-alone RDMA exporter process for tests and benchmarks, driven by JSON lines on stdin.

    python -m smg_fast.testing.rdma_peer --port P [--slots N] [--slot-bytes B] [--ttl-s T]

Prints {"ready": ..., "port": ...} once the exporter serves, then one JSON answer per command:
  {"op": "export", "nbytes": N, "seed": S}   payload = seeded random bytes, written in place
  {"op": "copy_in", "nbytes": N, "seed": S}  the same bytes, through the copy-in path
  {"op": "shm", "nbytes": N, "seed": S}      the same bytes in a /dev/shm segment: answers
                                             {"tensor": <hex of a serialized TensorData>}
  {"op": "lease", "nbytes": N, "seed": S}    written but not committed (answers its key)
  {"op": "commit", "key": K}                 commits such a lease (answers its descriptor)
  {"op": "free", "key": K}   {"op": "reap_after", "seconds": X}   {"op": "stats"}   {"op": "exit"}
  {"op": "advance_reap_clock", "seconds": X}  the exporter's own reaper runs X seconds ahead
Exports answer {"descriptor": <hex>, "nbytes": N, "key": K} or {"refused": <reason>}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from smg_fast.transport.rdma import TRANSPORT, Exporter, ExportRefused
from smg_fast.transport.shm import ShmRegistry
from smg_fast.transport.tensors import to_tensor_data


def payload(nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


class PeerProcess:
    """Runs this module as a child process and drives it (tests and benchmarks).

    Thread-safe: one command/answer pair at a time; every wait is bounded."""

    def __init__(self, port: int = 0, **opts: object) -> None:
        argv = [sys.executable, "-m", "smg_fast.testing.rdma_peer", "--port", str(port)]
        for k, v in opts.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self._lock = threading.Lock()
        ready = self._line(timeout=60)
        self.name, self.port = ready["ready"], ready["port"]

    def _line(self, timeout: float = 30) -> dict:
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(timeout)
        if not (out and out[0]):
            raise RuntimeError(f"rdma peer did not answer (exit code {self.proc.poll()})")
        return json.loads(out[0])

    def cmd(self, **kw: object) -> dict:
        with self._lock:
            self.proc.stdin.write(json.dumps(kw) + "\n")
            self.proc.stdin.flush()
            return self._line()

    def export(self, nbytes: int, seed: int = 0, op: str = "export") -> Any:
        """A RemoteTensorHandle of payload(nbytes, seed), waiting (up to 60 s) for a free slot.

        A pulled slot is freed by a notification that arrives a little later."""
        from smg_fast._proto import tensor_pb2

        deadline = time.monotonic() + 60
        while True:
            r = self.cmd(op=op, nbytes=nbytes, seed=seed)
            if r.get("refused") != "arena_full" or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if "descriptor" not in r:
            raise RuntimeError(f"rdma peer refused the export: {r}")
        return tensor_pb2.RemoteTensorHandle(transport=TRANSPORT, nbytes=nbytes,
                                             descriptor=bytes.fromhex(r["descriptor"]))

    def wait_stats(self, pred: Callable[[dict], bool], timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            s = self.cmd(op="stats")
            if pred(s) or time.monotonic() > deadline:
                return s
            time.sleep(0.02)

    def close(self) -> None:
        """Lets the peer exit on its own (it unlinks the shm segments nobody read)."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            if not f.closed:
                f.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--slot-bytes", type=int, default=8 << 20)
    ap.add_argument("--ttl-s", type=float, default=30.0)
    args = ap.parse_args()
    # Replies go to a private copy of stdout; fd 1 itself becomes stderr, so what native code
    # prints (UCX's error lines) cannot land inside the JSON protocol.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    exp = Exporter(slots=args.slots, slot_bytes=args.slot_bytes, ttl_s=args.ttl_s,
                   listen_port=args.port)
    registry = ShmRegistry()  # segments the consumer did not read are unlinked at exit
    open_leases = {}
    print(json.dumps({"ready": exp.name, "port": exp.port}), file=replies, flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        out: dict[str, object] = {}
        try:
            if op in ("export", "copy_in"):
                data = payload(cmd["nbytes"], cmd["seed"])
                if op == "export":
                    lease = exp.lease(data.nbytes)
                    lease.array()[:] = data
                    desc = lease.commit()
                else:
                    desc = exp.export_array(data)
                out = {"descriptor": desc.encode().hex(), "nbytes": desc.nbytes, "key": desc.key}
            elif op == "shm":
                td = to_tensor_data(payload(cmd["nbytes"], cmd["seed"]), transport="shm",
                                    registry=registry)
                out = {"tensor": td.SerializeToString().hex()}
            elif op == "lease":
                lease = exp.lease(cmd["nbytes"])
                lease.array()[:] = payload(cmd["nbytes"], cmd["seed"])
                open_leases[lease.key] = lease
                out = {"key": lease.key}
            elif op == "commit":
                desc = open_leases.pop(cmd["key"]).commit()
                out = {"descriptor": desc.encode().hex(), "nbytes": desc.nbytes, "key": desc.key}
            elif op == "free":
                out = {"freed": exp.free(cmd["key"])}
            elif op == "reap_after":
                out = {"reaped": exp.arena.reap_after(cmd["seconds"])}
            elif op == "advance_reap_clock":
                exp.advance_reap_clock(cmd["seconds"])
                out = {"ahead_s": cmd["seconds"]}
            elif op == "stats":
                out = exp.stats()
            elif op == "exit":
                break
        except ExportRefused as exc:
            out = {"refused": exc.reason}
        print(json.dumps(out), file=replies, flush=True)
    exp.close()
    registry.close()


if __name__ == "__main__":
    main()
