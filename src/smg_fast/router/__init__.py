"""``python -m smg_fast.router``: the routing process in front of a fleet of smg-fast servers
(see :mod:`smg_fast.routing.router`; needs the ``server`` extra)."""
