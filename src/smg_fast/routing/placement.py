"""Where each image goes: its key, its rendezvous order over the members, the load bound.

The key is the identity the servers' pixel cache uses (blake3 of the encoded bytes, and what
changes the output: model, dtype, min/max pixels), so an image lands where its pixels are cached.
Rendezvous (highest-random-weight) hashing gives each key a full preference order over the
members; it depends only on the member names and the key, so every router with the same
membership agrees, and removing a member moves only the keys it held first.
"""

from __future__ import annotations

import base64
import binascii
import math
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import xxhash
from blake3 import blake3


def _data_url_bytes(url: str) -> bytes | None:
    """A data: URL's decoded bytes, or None when malformed (the server will refuse it)."""
    header, sep, payload = url[5:].partition(",")
    if not sep:
        return None
    if header.lower().endswith(";base64"):
        try:
            return base64.b64decode(payload.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
    return urllib.parse.unquote_to_bytes(payload)


def content_id(item: Any) -> bytes:
    """What identifies one MediaItem's image: blake3 of its encoded bytes (data, and data:
    URLs by their decoded bytes, as the server hashes them); file:// URLs and paths by the path
    (reading them here would cost what the server will pay anyway)."""
    kind = item.WhichOneof("source")
    if kind == "data":
        return blake3(item.data).digest()
    url = item.url if kind == "url" else ""
    if url[:5].lower() == "data:":
        data = _data_url_bytes(url)
        if data is not None:
            return blake3(data).digest()
    return blake3(b"url\0" + url.encode("utf-8", "surrogatepass")).digest()


def item_key(item: Any, model: str, dtype: str, min_pixels: int | None,
             max_pixels: int | None) -> bytes:
    """The placement key of one image in one request (model: the resolved name, never "")."""
    fields = f"\0{model}\0{dtype or 'float32'}\0{min_pixels or 0}\0{max_pixels or 0}"
    return content_id(item) + fields.encode()


def score(member: str, key: bytes) -> int:
    """The member's rendezvous weight for key (64-bit xxh3 of both, the member name first)."""
    return xxhash.xxh3_64_intdigest(key, seed=xxhash.xxh3_64_intdigest(member.encode()))


def order(key: bytes, members: Iterable[str]) -> list[str]:
    """The key's preference order: highest weight first, ties broken by name."""
    return sorted(members, key=lambda m: (-score(m, key), m))


def bound(total_in_flight: int, members: int, load_factor: float, floor: int) -> int:
    """The most in-flight items one member may hold when one more is placed:
    max(floor, ceil(load_factor * (total + 1) / members))."""
    if members <= 0:
        return floor
    return max(floor, math.ceil(load_factor * (total_in_flight + 1) / members))


def choose(key: bytes, members: Sequence[str], in_flight: Mapping[str, int],
           load_factor: float, floor: int) -> tuple[str, bool]:
    """(member, spilled): the first member in the key's order below the bound; spilled when
    that is not the key's first choice. With load_factor >= 1 some member is always below
    the bound (the bounds add up to more than the load); otherwise the first choice."""
    if not members:
        raise ValueError("no members to place on")
    ranked = order(key, members)
    total = sum(in_flight.get(m, 0) for m in members)
    cap = bound(total, len(members), load_factor, floor)
    for m in ranked:
        if in_flight.get(m, 0) < cap:
            return m, m != ranked[0]
    return ranked[0], False
