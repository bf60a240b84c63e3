"""Builds the one native extension, smg_fast._native, from csrc/*.cpp."""

from glob import glob

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

# Exactness: no FMA contraction, no fast-math. Portability: no -march=native; hot loops carry
# their own AVX2 / AVX-512 versions selected at run time (see csrc/cpu.hpp).
# -fno-wrapv undoes the -fwrapv in Python's own CFLAGS, which blocks loop vectorization (~35% slower).
CXX_FLAGS = ["-O3", "-fno-wrapv", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra", "-fvisibility=hidden"]

ext = Pybind11Extension(
    "smg_fast._native",
    sorted(glob("csrc/*.cpp")),
    include_dirs=["csrc"],
    cxx_std=17,
    extra_compile_args=CXX_FLAGS,
    extra_link_args=["-pthread"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
