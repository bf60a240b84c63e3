"""Builds the one native extension, smg_fast._native, from every csrc/**/*.cpp."""

import os
import re
from glob import glob
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# Exactness: no FMA contraction, no fast-math. Portability: no -march=native; hot loops carry
# their own AVX2 / AVX-512 versions selected at run time (see csrc/dispatch.hpp).
# -fno-wrapv undoes the -fwrapv in Python's own CFLAGS, which blocks loop vectorization
# (~35% slower).
CXX_FLAGS = ["-O3", "-fno-wrapv", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra",
             "-fvisibility=hidden"]

# CI builds with SMG_FAST_WERROR=1: the C++ must stay free of warnings.
if os.environ.get("SMG_FAST_WERROR") == "1":
    CXX_FLAGS.append("-Werror")

# The version is written once (src/smg_fast/_version.py) and compiled in, so that importing a
# stale extension next to newer Python code fails loudly instead of computing with old kernels.
VERSION_FILE = Path(__file__).with_name("src").joinpath("smg_fast", "_version.py")
VERSION = re.search(r'__version__ = "([^"]+)"', VERSION_FILE.read_text())[1]

ext = Pybind11Extension(
    "smg_fast._native",
    # every source under csrc/ (kernels live in per-stage folders: resample/, patchify/, ...)
    sorted(glob("csrc/**/*.cpp", recursive=True)),
    # a header or the version changing rebuilds everything (the version is compiled in)
    depends=[*sorted(glob("csrc/**/*.hpp", recursive=True)), "src/smg_fast/_version.py"],
    include_dirs=["csrc"],
    cxx_std=17,
    extra_compile_args=CXX_FLAGS,
    extra_link_args=["-pthread", "-ldl"],  # dlopen: csrc/decode/jpeg.cpp binds Pillow's libjpeg
    define_macros=[("SMG_FAST_VERSION", f'"{VERSION}"')],
)

setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
