"""The router process (``python -m smg_fast.router``) in front of a fleet of smg-fast servers.

App.py serves it, config.py and flags.py are its settings, metrics.py its /metrics; the routing
itself is the library's (:mod:`smg_fast.routing`). Needs the ``server`` extra."""
