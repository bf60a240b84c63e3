"""The server's JPEG decode inside the native call against decoding it ahead, in one run.

"inside" (the default): each JPEG decodes inside the native call that writes its destination.
"ahead": it decodes first (the same build with PlannedBatch.decodes_while_computing forced off). The
two arms alternate. Unique 1920x1080 JPEGs (every request computes), float32, pixel cache off, 2
workers, real servers on 127.0.0.1 driven by the project's load generator; req/s, p50 latency and
the server's CPU per request (medians of the rounds).

    PYTHONPATH=src python bench/server_decode.py [--seconds 8] [--rounds 2]
        [--concurrency 1,8] [--transports shm,rdma]     # ~4 minutes; rdma needs NIXL

Rounds alternate which arm runs first.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

from gate import cpu_model, kernel_key

import smg_fast
from smg_fast.client import Client
from smg_fast.imaging import decoders
from smg_fast.testing.servers import ServerProcess

# Runs the server with the decode ahead of the compute (the behaviour before it moved inside).
_AHEAD = ("import runpy, sys\n"
          "from smg_fast.processors.batch import PlannedBatch\n"
          "PlannedBatch.decodes_while_computing = property(lambda self: False)\n"
          "sys.argv[0] = 'smg_fast.server'\n"
          "runpy.run_module('smg_fast.server', run_name='__main__')\n")
_NUMBERS = re.compile(r"([\d.]+) req/s .* p50 ([\d.]+) ms .*server CPU [\d.]+ s: ([\d.]+) ms",
                      re.DOTALL)


class _AheadServer(ServerProcess):
    def launcher(self) -> list[str]:
        return ["-c", _AHEAD]


def _measure(mode: str, transport: str, concurrency: int, seconds: float) -> tuple[float, ...]:
    kind = _AheadServer if mode == "ahead" else ServerProcess
    with kind(["--workers", "2", "--pixel-cache-mb", "0", "--log-level", "warning",
               "--transport", transport, "--rdma-listen-port", "0", "--rdma-slot-mb", "64",
               "--rdma-slots", "16"]) as server:
        if transport == "rdma":
            with Client(server.target) as c:
                if not c.model_info()["rdma_available"]:
                    raise RuntimeError("the server has no RDMA (is NIXL installed?)")
        out = subprocess.run(
            [sys.executable, "-m", "smg_fast.bench.load", "--target", server.target,
             "--concurrency", str(concurrency), "--seconds", str(seconds), "--transport",
             transport, "--unique", "--dtype", "float32", "--no-progress", "--server-pid",
             str(server.pid)], capture_output=True, text=True, timeout=seconds + 120)
    found = _NUMBERS.search(out.stdout)
    if out.returncode or not found:
        raise RuntimeError(f"load generator failed: {out.stdout}{out.stderr}")
    return tuple(float(v) for v in found.groups())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--transports", default="shm,rdma")
    args = ap.parse_args(argv)
    if decoders.jpeg_engine() != decoders.PILLOW_LIBJPEG:
        raise SystemExit("the native JPEG decoder is not bound here: both arms would decode "
                         "ahead (build with jpeglib.h: .ci/test_tools.sh, then pip install .)")
    print(f"# {cpu_model()} | kernels {kernel_key()} | smg_fast from "
          f"{Path(smg_fast.__file__).parent} | {args.seconds:g} s x {args.rounds} rounds")
    print("| transport | concurrency | req/s inside / ahead | p50 ms inside / ahead "
          "| server CPU ms per request inside / ahead |")
    print("|---|--:|--:|--:|--:|")
    for transport in args.transports.split(","):
        for conc in (int(c) for c in args.concurrency.split(",")):
            got: dict[str, list[tuple[float, ...]]] = {"inside": [], "ahead": []}
            for r in range(args.rounds):
                for mode in (("inside", "ahead") if r % 2 == 0 else ("ahead", "inside")):
                    got[mode].append(_measure(mode, transport, conc, args.seconds))
            med = {m: [statistics.median(r[i] for r in runs) for i in range(3)]
                   for m, runs in got.items()}
            cells = [f"{med['inside'][i]:.1f} / {med['ahead'][i]:.1f} "
                     f"({med['inside'][i] / med['ahead'][i]:.2f}x)" for i in range(3)]
            print(f"| {transport} | {conc} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
