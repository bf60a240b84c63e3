"""Deprecated path of :mod:`smg_fast.transport.rdma.preflight` (the same module object; warns once).

``python -m smg_fast.rdma.preflight`` still runs the check."""

if __name__ == "__main__":
    from smg_fast.transport.rdma.preflight import main

    main()
else:
    from .._deprecated import alias_module

    alias_module(__name__, "smg_fast.transport.rdma.preflight")
