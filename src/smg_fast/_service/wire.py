"""The wire names and limits the server, the router and the routing library agree on.

The trailer a RESOURCE_EXHAUSTED answer carries (written by one side, read by the other), the caller
a router forwards for, and the most images one request may hold."""

from __future__ import annotations

import grpc

# Trailing metadata on every RESOURCE_EXHAUSTED answer of a server or router: "1" when the
# request may succeed later or elsewhere (admission, shm room, memory), "0" when it can never
# fit (a size limit).
RETRYABLE_KEY = "smg-fast-retryable"
# Request metadata a router sends naming its own caller; a worker honours it only from a
# --trusted-router-peer (server/shm_shares.py). Longer names are cut (the router sends a peer
# address or a hash).
CALLER_KEY = "smg-fast-caller"
MAX_CALLER_LEN = 256

# Images per Preprocess request: more is INVALID_ARGUMENT from a server, a router and the routing
# library alike.
MAX_ITEMS = 1024


def too_many_items(n: int) -> str:
    """The INVALID_ARGUMENT message of a request with n > MAX_ITEMS images."""
    return f"{n} items, at most {MAX_ITEMS} per request"


def trailers(code: grpc.StatusCode, retryable: bool) -> tuple[tuple[str, str], ...]:
    """The trailing metadata of an answer with this code: RETRYABLE_KEY on RESOURCE_EXHAUSTED."""
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ()
    return ((RETRYABLE_KEY, "1" if retryable else "0"),)


def says_retryable(exc: grpc.aio.AioRpcError) -> bool:
    """A RESOURCE_EXHAUSTED answer's own word.

    Admission, shm room and memory say "1"; a size limit says "0". No word is no: gRPC's own
    RESOURCE_EXHAUSTED (a message over the largest size, sent or received) carries no trailer and
    fails the same way on every member (every smg-fast server and router marks its own answers)."""
    return any(key == RETRYABLE_KEY and value == "1"
               for key, value in exc.trailing_metadata() or ())
