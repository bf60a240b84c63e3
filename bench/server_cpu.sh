#!/usr/bin/env bash
# Server CPU per request under saturation (issue 9, goal 4): concurrency 8, unique 1920x1080
# JPEGs (every request computes), float32, pixel cache off, against a real server on 127.0.0.1,
# next to the in-process CPU of the same bytes -> tensor work, all in one run.
#   bash bench/server_cpu.sh [SECONDS]        # ~2 minutes; needs NIXL for the rdma row
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
run() {  # $1 = label, $2 = transport, rest = server arguments
  local label=$1 transport=$2; shift 2
  local port
  port=$(python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  python -m smg_fast.server --port "$port" --workers 2 --pixel-cache-mb 0 --log-level warning \
    "$@" 2>/dev/null &
  local pid=$!
  python -c "from smg_fast.testing.servers import wait_serving; wait_serving('127.0.0.1:$port', timeout=60)"
  echo "$label | $(python -m smg_fast.bench.load --target "127.0.0.1:$port" --concurrency 8 \
    --seconds "$secs" --transport "$transport" --unique --dtype float32 --no-progress \
    --server-pid "$pid" 2>&1 | grep 'server CPU')"
  kill -TERM "$pid"
  wait "$pid"
}
run "shm (reuse)" shm --transport shm
run "shm (--shm-reuse 0)" shm --transport shm --shm-reuse 0
run "rdma" rdma --transport rdma --rdma-listen-port 0 --rdma-slot-mb 64 --rdma-slots 16
run "inline" inline --transport inline
python - <<'PY'
import threading
import time

from smg_fast import load_processor
from smg_fast.imaging.sample import test_pattern_bytes

import smg_fast

proc = load_processor("qwen2_vl")
data = test_pattern_bytes()
default = smg_fast.get_num_threads()
# 1 thread: the work alone. The default (all CPUs) adds the pool's hand-offs (one JPEG's decode
# overlaps its resize there): the smaller number is the stricter denominator.
for threads in (1, default):
    smg_fast.set_num_threads(threads)
    proc(data, dtype="float32")
    cpu = []
    for i in range(30):
        unique = data + b"in-process %d" % i  # the load generator's way of making bytes unique
        t0 = time.process_time()
        out = proc(unique, dtype="float32")["pixel_values"]
        cpu.append(time.process_time() - t0)
        del out
    cpu.sort()
    print(f"in-process, {threads} thread(s) | CPU per request: median {cpu[len(cpu) // 2] * 1e3:.1f} ms")
# Two requests' work at once, as a saturated server's two workers (--workers 2) share both cores
# and the memory bandwidth: two plain calls in parallel, 1 native thread each. (The server itself
# decodes ahead on the default pool; in-process those variants measured within noise of this.)
# Process CPU / requests.
smg_fast.set_num_threads(1)
done = []


def caller(k: int) -> None:
    for i in range(30):
        proc(data + b"caller %d-%d" % (k, i), dtype="float32")
    done.append(30)


t0 = time.process_time()
callers = [threading.Thread(target=caller, args=(k,)) for k in range(2)]
for t in callers:
    t.start()
for t in callers:
    t.join()
print(f"in-process, 2 callers at once | CPU per request: "
      f"{(time.process_time() - t0) / sum(done) * 1e3:.1f} ms")
smg_fast.set_num_threads(default)
PY
