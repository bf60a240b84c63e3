"""A stand-alone RDMA exporter process for tests and benchmarks, driven by JSON lines on stdin.

    python -m smg_fast.bench.rdma_peer --port P [--slots N] [--slot-bytes B] [--ttl-s T]

Prints {"ready": ..., "port": ...} once the exporter serves, then one JSON answer per command:
  {"op": "export", "nbytes": N, "seed": S}   payload = seeded random bytes, written in place
  {"op": "copy_in", "nbytes": N, "seed": S}  the same bytes, through the copy-in path
  {"op": "shm", "nbytes": N, "seed": S}      the same bytes in a /dev/shm segment: answers
                                             {"tensor": <hex of a serialized TensorData>}
  {"op": "free", "key": K}   {"op": "reap_after", "seconds": X}   {"op": "stats"}   {"op": "exit"}
Exports answer {"descriptor": <hex>, "nbytes": N, "key": K} or {"refused": <reason>}.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from smg_fast.rdma import Exporter, ExportRefused
from smg_fast.shm import ShmRegistry
from smg_fast.tensors import to_tensor_data


def payload(nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--slot-bytes", type=int, default=8 << 20)
    ap.add_argument("--ttl-s", type=float, default=30.0)
    args = ap.parse_args()
    exp = Exporter(slots=args.slots, slot_bytes=args.slot_bytes, ttl_s=args.ttl_s,
                   listen_port=args.port)
    registry = ShmRegistry()  # segments the consumer did not read are unlinked at exit
    print(json.dumps({"ready": exp.name, "port": exp.port}), flush=True)
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
            elif op == "free":
                out = {"freed": exp.free(cmd["key"])}
            elif op == "reap_after":
                out = {"reaped": exp.arena.reap_after(cmd["seconds"])}
            elif op == "stats":
                out = exp.stats()
            elif op == "exit":
                break
        except ExportRefused as exc:
            out = {"refused": exc.reason}
        print(json.dumps(out), flush=True)
    exp.close()
    registry.close()


if __name__ == "__main__":
    main()
