"""The encode-stage service: ``python -m smg_fast.server`` (needs the ``server`` extra).

Embedding: ``await Server(ServerConfig(...)).start()`` on your event loop, or
``BackgroundServer(config)`` on a thread of its own.
"""

from .app import SERVICE_NAME, Server, serve
from .config import ServerConfig
from .flags import config_from_args
from .threaded import BackgroundServer

__all__ = ["SERVICE_NAME", "BackgroundServer", "Server", "ServerConfig", "config_from_args",
           "serve"]
