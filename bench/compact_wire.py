"""float32, bfloat16 and the compact "uint8+lut" format across a TCP loopback limited to ~1 GB/s.

Bytes per image and end-to-end latency per format, and the consumer's expansion against one copy.

A real server (its own process, inline transport, pixel cache off: every request computes) is
reached through a throttled proxy written here (a token bucket per direction, default 1 GB/s).
Per format: the response's bytes, and the latency from sending a 1920x1080 JPEG to holding the
float tensor (the compact one expanded by smg_fast.expand), medians of the rounds; every result
is checked equal to the in-process float output. Then, in process, expanding the compact output
against copying the float32 / bfloat16 output once (fresh destination, and into a kept one).

    PYTHONPATH=src python bench/compact_wire.py [--rounds 9] [--gbps 1.0] [--model qwen2_vl]
        [--consumer-only]

--consumer-only runs only the in-process expansion table (no server, no grpc needed); under
SMG_FAST_ISA caps it compares the expand kernels (the table names the one that ran).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from gate import cpu_model

import smg_fast
from smg_fast.imaging.sample import sample_image_bytes

FORMATS = (("float32", "float32", ""), ("bfloat16", "bfloat16", ""),
           ("uint8+lut (float32)", "float32", "uint8+lut"),
           ("uint8+lut (bfloat16)", "bfloat16", "uint8+lut"))
_CHUNK = 1 << 18


class ThrottledProxy:
    """A TCP proxy on 127.0.0.1 forwarding to target at most rate bytes/s each way."""

    def __init__(self, target: tuple[str, int], rate: float) -> None:
        self.target, self.rate = target, rate
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        due = time.perf_counter()
        try:
            while data := src.recv(_CHUNK):
                now = time.perf_counter()
                due = max(due, now) + len(data) / self.rate
                if due > now:
                    time.sleep(due - now)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _once(stub: Any, data: bytes, dtype: str, encoding: str, want: np.ndarray) -> int:
    """One request to holding the float tensor (expanded); checks it; the response's bytes."""
    from smg_fast.client import build_request, read_response

    resp = stub.Preprocess(build_request(data, dtype=dtype, transport="inline",
                                         encoding=encoding))
    got = read_response(resp, expand=True).pixel_values
    if not np.array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8)):
        raise AssertionError(f"{dtype} {encoding or 'plain'}: not the in-process output")
    return resp.ByteSize()


def wire(model: str, rounds: int, rate: float) -> None:
    import grpc

    from smg_fast._proto import preprocessor_pb2_grpc as pb_grpc
    from smg_fast.testing.servers import ServerProcess

    data = sample_image_bytes()
    proc = smg_fast.load_processor(model)
    opts = [("grpc.max_receive_message_length", 256 << 20)]
    with ServerProcess(["--model", f"{model}={model}", "--workers", "1", "--pixel-cache-mb", "0",
                        "--transport", "inline", "--log-level", "warning"]) as server:
        host, port = server.target.rsplit(":", 1)
        proxy = ThrottledProxy((host, int(port)), rate)
        with grpc.insecure_channel(f"127.0.0.1:{proxy.port}", options=opts) as slow, \
                grpc.insecure_channel(server.target, options=opts) as direct:
            stubs = (pb_grpc.PreprocessorStub(slow), pb_grpc.PreprocessorStub(direct))
            print(f"{'format':<22}{'bytes/image':>14}{'vs float32':>12}{'1 GB/s ms':>11}"
                  f"{'direct ms':>11}")
            base = 0
            for label, dtype, encoding in FORMATS:
                want = proc(data, dtype=dtype)["pixel_values"]
                ms = []
                for stub in stubs:
                    run = partial(_once, stub, data, dtype, encoding, want)
                    size = run()  # warm: the server's pools, the channel
                    ms.append(_median_ms(run, rounds))
                base = base or size
                print(f"{label:<22}{size:>14,}{base / size:>11.2f}x{ms[0]:>11.1f}{ms[1]:>11.1f}")
        proxy.close()


def expansion(model: str, rounds: int) -> None:
    proc = smg_fast.load_processor(model)
    data = sample_image_bytes()
    print(f"\n{'consumer side (ms, median)':<34}{'fresh dst':>10}{'kept dst':>10}"
          f"   (expand kernel: {smg_fast.kernel_info()['selected']['expand']})")
    for dtype in ("float32", "bfloat16"):
        full = proc(data, dtype=dtype)["pixel_values"]
        c = proc(data, dtype=dtype, encoding="uint8+lut")["pixel_values"]
        kept = np.empty_like(full)
        rows = ((f"copy the {dtype} output once", partial(np.copy, full),
                 partial(np.copyto, kept, full)),
                (f"expand uint8+lut to {dtype}", partial(smg_fast.expand, c),
                 partial(smg_fast.expand, c, out=kept)))
        for label, fresh, into in rows:
            fresh(), into()
            print(f"{label:<34}{_median_ms(fresh, rounds):>10.2f}{_median_ms(into, rounds):>10.2f}")
        assert np.array_equal(smg_fast.expand(c), full)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--gbps", type=float, default=1.0, help="proxy rate, GB/s each way")
    ap.add_argument("--model", default="qwen2_vl")
    ap.add_argument("--consumer-only", action="store_true",
                    help="only the in-process expansion table (no server)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if args.gbps <= 0:
        ap.error("--gbps must be > 0")
    print(f"{cpu_model()}, {smg_fast.get_num_threads()} native threads, 1920x1080 JPEG, "
          f"{args.model}, proxy {args.gbps:g} GB/s, {args.rounds} rounds, "
          f"SMG_FAST_ISA={smg_fast.kernel_info()['isa_cap']}")
    if not args.consumer_only:
        wire(args.model, args.rounds, args.gbps * 1e9)
    expansion(args.model, args.rounds * 3)


if __name__ == "__main__":
    main()
