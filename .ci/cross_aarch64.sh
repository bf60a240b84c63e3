#!/usr/bin/env bash
# Portability gate (aarch64: Grace hosts, GH200/GB200): cross-compiles every C++ source for
# aarch64 with Debian's g++-aarch64-linux-gnu, warnings as errors, and links the Python-free
# core into a shared object with no undefined symbols. There the x86 kernels (SMG_X86 in
# csrc/cpu.hpp) are compiled out and the NEON ones in. The core is also linked with tests/native
# into the kernel comparison binary, run under QEMU user-mode (qemu-user-static): every NEON
# kernel byte for byte against the portable one (a few seconds). The bind_*.cpp files (the
# only pybind11 code) are compiled against this Python's and pybind11's headers: only the
# pyconfig.h of an LP64 x86-64 Python, which matches aarch64's type sizes; a compile check, the
# objects are not linked.
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=aarch64-linux-gnu-g++
if ! command -v "$CXX" >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq g++-aarch64-linux-gnu qemu-user-static >/dev/null
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The same language and warning flags as setup.py (no x86 -m flags exist there to drop).
FLAGS=(-std=c++17 -O2 -fPIC -Wall -Wextra -Werror -ffp-contract=off -fno-fast-math -fvisibility=hidden
       -Icsrc -DSMG_FAST_VERSION='"cross"')
objs=()
core=$(find csrc -name '*.cpp' ! -name 'bind_*' | sort)
for src in $core; do
    obj="$out/$(echo "${src#csrc/}" | tr / _).o"  # resample/avx2.cpp and patchify/avx2.cpp both exist
    "$CXX" "${FLAGS[@]}" -c "$src" -o "$obj" &
    objs+=("$obj")
done
wait_all() { local rc=0; for p in $(jobs -p); do wait "$p" || rc=1; done; return $rc; }
wait_all
# Every symbol the core needs is defined (or in libstdc++/libc for aarch64).
"$CXX" -shared -pthread -Wl,--no-undefined -o "$out/libsmg_core.so" "${objs[@]}"
aarch64-linux-gnu-readelf -h "$out/libsmg_core.so" | grep -q "Machine:.*AArch64"

# The NEON kernels against the portable ones (tests/native), on the emulated CPU.
tests=()
for src in tests/native/*.cpp; do
    "$CXX" "${FLAGS[@]}" -Itests/native -c "$src" -o "$out/test_$(basename "${src%.cpp}").o" &
    tests+=("$out/test_$(basename "${src%.cpp}").o")
done
wait_all
"$CXX" -pthread -o "$out/kernel_compare" "${objs[@]}" "${tests[@]}" -ldl
qemu-aarch64-static -L /usr/aarch64-linux-gnu "$out/kernel_compare"

# pybind11 is a build-time requirement (pip's isolated build has its own): fetch it if absent.
python -c "import pybind11" 2>/dev/null || python -m pip install -q "pybind11>=2.12"
PY_INC=$(python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
PYBIND_INC=$(python -c "import pybind11; print(pybind11.get_include())")
# Debian's own Python has a multiarch pyconfig.h that, under __aarch64__, includes
# aarch64-linux-gnu/python3.X/pyconfig.h (absent without libpython3-dev:arm64): point that name at
# the x86-64 one, whose LP64 type sizes are aarch64's.
MULTI=$(python -c "import sysconfig; print(sysconfig.get_config_var('MULTIARCH') or '')")
PYVER=$(python -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
if [ -n "$MULTI" ] && [ -f "/usr/include/$MULTI/python$PYVER/pyconfig.h" ]; then
    mkdir -p "$out/inc/aarch64-linux-gnu/python$PYVER"
    ln -s "/usr/include/$MULTI/python$PYVER/pyconfig.h" "$out/inc/aarch64-linux-gnu/python$PYVER/"
fi
mkdir -p "$out/inc"
for src in csrc/bind_*.cpp; do
    "$CXX" "${FLAGS[@]}" -I"$PY_INC" -I"$PYBIND_INC" -I"$out/inc" -c "$src" \
        -o "$out/$(basename "${src%.cpp}").o" &
done
wait_all
echo "aarch64 cross-compile: OK ($(find csrc -name '*.cpp' | wc -l) sources, core linked without undefined symbols," \
    "NEON kernels equal to the portable ones under QEMU)"
