"""The harness the tests and the benchmarks share.

Server processes, reference oracles and venvs, tiny model folders, engine runners (as
``numpy.testing`` ships numpy's)."""
