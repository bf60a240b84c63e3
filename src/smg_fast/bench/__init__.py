"""Benchmark tools that ship with the package: ``python -m smg_fast.bench.load``."""
