#!/usr/bin/env bash
# Builds tests/native (plain C++, no Python) for this host against the core sources and runs it:
# every SIMD kernel of the dispatch tables that the host compiles and runs (x86-64: SSE2, AVX2,
# AVX-512 as the CPU has them), byte for byte against the portable kernel of its stage; a
# mismatch, or a stage with nothing to compare, fails. `SEED=n` picks other random cases. The
# aarch64 build runs in .ci/cross_aarch64.sh, under QEMU.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${CXX:-g++}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# setup.py's language and warning flags, warnings as errors.
FLAGS=(-std=c++17 -O2 -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math -Icsrc -Itests/native
       -DSMG_FAST_VERSION='"native-test"')
objs=()
for src in $(find csrc -name '*.cpp' ! -name 'bind_*' | sort) tests/native/*.cpp; do
    obj="$out/$(echo "$src" | tr / _).o"
    "$CXX" "${FLAGS[@]}" -c "$src" -o "$obj" &
    objs+=("$obj")
done
rc=0
for p in $(jobs -p); do wait "$p" || rc=1; done
[ $rc = 0 ]
"$CXX" -pthread -o "$out/kernel_compare" "${objs[@]}" -ldl
"$out/kernel_compare" "${SEED:-1}"
