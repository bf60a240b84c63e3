"""A router never routes to itself: a discovery record naming the router is refused.

An SRV or DNS record (a mistake, or a hostile name server) may name the router's own address
among its members: every request it placed there would come back through it, again and again
until the deadline. So each router process has a random identity that its membership sends in
``smg-fast-router`` metadata when it joins a member (GetModelInfo); the router's own GetModelInfo
refuses a call carrying its identity (FAILED_PRECONDITION, SELF_DETAIL), and the membership then
refuses that member as it refuses a mismatched one. Another router, and any server, ignore it."""

from __future__ import annotations

import secrets
from collections.abc import Iterable

ROUTER_KEY = "smg-fast-router"
ROUTER_ID = secrets.token_hex(16)  # this process's
SELF_DETAIL = "this member is the asking router itself"


def join_metadata() -> tuple[tuple[str, str], ...]:
    """The metadata a member's join carries."""
    return ((ROUTER_KEY, ROUTER_ID),)


def asked_by_self(metadata: Iterable[tuple[str, object]] | None) -> bool:
    """Whether a call's metadata carries this process's router identity."""
    return any(key == ROUTER_KEY and value == ROUTER_ID for key, value in metadata or ())
