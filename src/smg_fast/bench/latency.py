"""Single-request latency of a real server over /dev/shm, against in-process preprocessing.

    python -m smg_fast.bench.latency [--rounds 3] [--requests 15] [--gap-s 0.2] [--image x.jpg]

Starts two ``python -m smg_fast.server`` processes on free loopback ports (pixel cache off, and
on) and sends one image per request with ``--gap-s`` of idle time between requests, the way a
lightly loaded encode stage sees them. Modes: ``off`` (cache off), ``hit`` (cache on, the same bytes
every time, after one warm-up request), ``miss`` (cache on, every request's bytes made unique by
a suffix decoders ignore, so every request computes). For reference, the same run measures
in-process decode + preprocess of the same bytes (``load_processor(...)(data)``): back to back
("hot") and with the same idle gaps ("idle"). Idle requests of all modes take turns.

Reported per mode, medians in ms: ``e2e`` (send to arrays mapped: the client's
``read_tensor``, which maps without touching the pages), ``e2e+read`` (also reading one byte of
every page, i.e. what a consumer pays before it has used the data once), the gRPC call alone,
``read_tensor`` alone, and the server's own timings from the response.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np

_SERVER_KEYS = ("queue_us", "decode_us", "preprocess_us", "transport_us", "total_us")


def _touch(arr: np.ndarray) -> int:
    """Reads one byte of every 4 KiB page (faults the mapping in, as a first use would)."""
    flat = arr.reshape(-1).view(np.uint8)
    return int(flat[::4096].max()) if flat.size else 0


def in_process_hot(proc: object, data: bytes, count: int, dtype: str) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        px = proc(data, dtype=dtype)["pixel_values"]  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
        del px
    return out


def one_request(client: object, data: bytes, dtype: str) -> dict[str, float]:
    """One request over shm on an open Client: spans in seconds and the server's timings."""
    from ..client import build_request, read_response

    req = build_request(data, dtype=dtype, transport="shm", namespace=client.namespace)
    t0 = time.perf_counter()
    resp = client._stub.Preprocess(req)
    t1 = time.perf_counter()
    out = read_response(resp)
    t2 = time.perf_counter()
    _touch(out.items[0].pixel_values)
    t3 = time.perf_counter()
    item = out.items[0]
    if item.transport != "shm":
        raise RuntimeError(f"expected an shm tensor, got {item.transport!r}")
    row = {"e2e": t2 - t0, "e2e+read": t3 - t0, "rpc": t1 - t0, "read_tensor": t2 - t1,
           "hit": float(item.cache_hit)}
    row.update({k: out.timings[k] / 1e6 for k in _SERVER_KEYS})
    return row


def _median_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1e3


def run(data: bytes, *, model: str, requests: int, gap_s: float, cache_mb: int, dtype: str,
        server_args: list[str], rounds: int = 3) -> dict[str, dict[str, float]]:
    """Each round.

    ``requests`` in-process calls back to back ("hot"), then ``requests`` turns of one in-process
    call ("idle") and one request per mode, each after ``gap_s`` of idle time (turns interleave the
    modes, so a slow spell of a noisy machine hits all of them). Medians over every request."""
    from .. import load_processor
    from ..client import Client
    from ..testing.servers import ServerProcess

    common = ["--transport", "shm", "--log-level", "warning", "--model", model]
    servers = {"off": ServerProcess([*common, *server_args]),
               "cache": ServerProcess([*common, "--pixel-cache-mb", str(cache_mb),
                                       *server_args])}
    rows: dict[str, list[dict[str, float]]] = {"off": [], "hit": [], "miss": []}
    hot: list[float] = []
    idle: list[float] = []
    proc = load_processor(model)
    proc(data, dtype=dtype)  # LUTs, pools
    seq = [0]

    def unique() -> bytes:
        seq[0] += 1
        return data + b"smg-fast-latency-%d-%d" % (os.getpid(), seq[0])

    clients: dict[str, Client] = {}
    try:
        for name, srv in servers.items():
            srv.wait()
            clients[name] = Client(srv.target, timeout=120)
        modes = [("off", clients["off"], lambda: data), ("hit", clients["cache"], lambda: data),
                 ("miss", clients["cache"], unique)]
        for _, client, make in modes:  # connect, warm up, and the hit's entry
            one_request(client, make(), dtype)
        for _ in range(rounds):
            hot += in_process_hot(proc, data, requests, dtype)
            for _ in range(requests):
                time.sleep(gap_s)
                idle += in_process_hot(proc, data, 1, dtype)
                for mode, client, make in modes:
                    time.sleep(gap_s)
                    row = one_request(client, make(), dtype)
                    if bool(row["hit"]) != (mode == "hit"):
                        raise RuntimeError(f"mode {mode}: unexpected cache hit/miss")
                    rows[mode].append(row)
    finally:
        for client in clients.values():
            client.close()
        for srv in servers.values():
            srv.stop()
    results = {mode: {k: _median_ms([r[k] for r in got]) for k in got[0] if k != "hit"}
               for mode, got in rows.items()}
    results["in-process hot"] = {"e2e": _median_ms(hot)}
    results["in-process idle"] = {"e2e": _median_ms(idle)}
    return results


def report(results: dict[str, dict[str, float]]) -> str:
    cols = ["e2e", "e2e+read", "rpc", "read_tensor", "total_us", "decode_us", "preprocess_us",
            "transport_us", "queue_us"]
    ref = results["in-process idle"]["e2e"]
    head = ["mode", *[f"server {c.removesuffix('_us')}" if c.endswith("_us") else c
                      for c in cols], "e2e / in-process idle"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mode, row in results.items():
        cells = [f"{row[c]:.1f}" if c in row else "" for c in cols]
        lines.append(f"| {mode} | " + " | ".join(cells) + f" | {row['e2e'] / ref:.2f}x |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m smg_fast.bench.latency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=15, help="per mode and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap-s", type=float, default=0.2)
    ap.add_argument("--image", default=None, help="image file (default: a built-in 1920x1080 "
                                                  "JPEG of the test pattern)")
    ap.add_argument("--model", default="qwen2_vl")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--cache-mb", type=int, default=512)
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra server argument (repeatable): --server-arg=--shm-pool-mb=0")
    args = ap.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or args.gap_s < 0:
        ap.error("--requests and --rounds must be >= 1 and --gap-s >= 0")
    if args.image:
        with open(args.image, "rb") as fh:
            data = fh.read()
    else:
        from ..imaging.sample import sample_image_bytes

        data = sample_image_bytes()
    results = run(data, model=args.model, requests=args.requests, gap_s=args.gap_s,
                  cache_mb=args.cache_mb, dtype=args.dtype, server_args=args.server_arg,
                  rounds=args.rounds)
    print(f"{args.rounds} rounds x {args.requests} requests per mode, {args.gap_s} s apart, "
          f"{args.dtype}, {len(data)}-byte image; medians in ms")
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
