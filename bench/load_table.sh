#!/usr/bin/env bash
# The closed-loop load table of docs/performance.md: shm / rdma / inline x cache off / hit / miss
# x concurrency 1 and 8, against a real server on 127.0.0.1 (1920x1080 JPEG, float32). Needs NIXL
# for the rdma rows. Usage: bash bench/load_table.sh [PORT]
set -uo pipefail
cd "$(dirname "$0")/.."
port=${1:-50061}
run() {  # $1 = label, rest = load generator arguments
  echo "$1 | $(python -m smg_fast.bench.load --target "127.0.0.1:$port" --seconds 6 --no-progress \
    "${@:2}" 2>&1 | tail -1)"
}
for cache in off on; do
  extra=()
  [ "$cache" = on ] && extra=(--pixel-cache-mb 1024)
  python -m smg_fast.server --port "$port" --transport rdma --rdma-listen-port 0 \
    --rdma-slot-mb 64 --rdma-slots 16 --log-level warning "${extra[@]}" 2>/dev/null &
  pid=$!
  sleep 7
  for t in shm rdma inline; do
    for c in 1 8; do
      if [ "$cache" = off ]; then
        run "$t off c$c" --transport "$t" --concurrency "$c"
      else
        run "$t hit c$c" --transport "$t" --concurrency "$c"
        run "$t miss c$c" --transport "$t" --concurrency "$c" --unique
      fi
    done
  done
  kill -TERM "$pid"
  wait "$pid"
done
