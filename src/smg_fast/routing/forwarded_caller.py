"""The caller a routed request comes from, named to the workers.

It travels in ``smg-fast-caller`` request metadata so that a worker that trusts this router
(``--trusted-router-peer``) counts unread shm bytes per caller instead of one share for the router's
whole connection (server/shm_shares.py).

The router process sets ``CALLER`` to its caller's gRPC peer around the start of each routed
request; the sub-calls started under it (asyncio tasks copy the context) carry it. Unset (the
library clients): no metadata. A caller's own ``smg-fast-caller`` metadata is never forwarded:
only the router's view of who is calling counts.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

from .._service.wire import CALLER_KEY, MAX_CALLER_LEN

CALLER: ContextVar[str] = ContextVar("smg_fast_routed_caller", default="")


def caller_metadata() -> dict[str, tuple[tuple[str, str], ...]]:
    """The sub-call's keyword arguments naming the current caller.

    ``metadata``, or nothing when there is no caller (the call is made as before). A name that is
    not short printable ASCII (a unix socket path) goes as its hash."""
    name = CALLER.get()
    if not name:
        return {}
    if len(name) > MAX_CALLER_LEN or not (name.isascii() and name.isprintable()):
        name = "h:" + hashlib.blake2b(name.encode("utf-8", "replace"), digest_size=16).hexdigest()
    return {"metadata": ((CALLER_KEY, name),)}
