"""What the encode server and the router process share.

Settings from flags and the environment, admission, the /metrics endpoint, the gRPC server
scaffolding, the process runner, channel options, and the wire names (metadata keys, request limits)
every side agrees on.

Nothing here imports ``smg_fast.server``, ``smg_fast.routing`` or ``smg_fast.router``; the
modules are imported one by one (this package imports none of them), so a client reading
``wire`` or ``channel`` pulls in neither prometheus nor grpc's health service.
"""
