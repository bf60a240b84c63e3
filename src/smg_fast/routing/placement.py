"""Where each image (or video) goes: its key, its rendezvous order over the members, the load bound.

The key is the identity the servers' pixel cache uses (blake3 of the encoded bytes, and what
changes the output: model, dtype, min/max pixels), so an image lands where its pixels are cached.
Rendezvous (highest-random-weight) hashing gives each key a full preference order over the
members; it depends only on the member names and the key, so every router with the same
membership agrees, and removing a member moves only the keys it held first.

Under the load bound a key spills to its next member and misses there (then misses again when
it goes back to its first). So a router remembers where it recently placed each key
(``Affinity``) and sends a key it has placed before to the least loaded of those members that
is under the bound: a warm key stays where its pixels are, and a hot key, once it has a few
copies, goes to whichever of them is least loaded. A key whose remembered members are all at the
bound may wait (``wait``) for one of them, but only for one that will free a slot soon: one
whose items already waiting for it are fewer than its items in flight (each that ends frees a
slot, so the wait is about one item's time, what computing it again would cost); otherwise it
spills at once to its next member under the bound in the rendezvous order. A key the router has
not placed recently goes to its first member under the bound, as every router with the same
membership would place it: it misses wherever it goes. Every placement, in every case, is under
the bound (the bound only counts items sent to members, not items waiting in the router).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import xxhash
from blake3 import blake3

from ..imaging.data_urls import data_url_bytes


def content_id(item: Any) -> bytes:
    """What identifies one MediaItem's image.

    Blake3 of its encoded bytes (data, and data: URLs by their decoded bytes, as the server hashes
    them); file:// URLs and paths by the path (reading them here would cost what the server will pay
    anyway)."""
    kind = item.WhichOneof("source")
    if kind == "data":
        return blake3(item.data).digest()
    url = item.url if kind == "url" else ""
    if url[:5].lower() == "data:":
        try:
            return blake3(data_url_bytes(url)).digest()
        except ValueError:
            pass  # malformed: the server refuses it, wherever it goes
    return blake3(b"url\0" + url.encode("utf-8", "surrogatepass")).digest()


def item_key(item: Any, model: str, dtype: str, min_pixels: int | None,
             max_pixels: int | None) -> bytes:
    """The placement key of one image (or video) in one request (model: resolved, never "").

    A video's key adds its options (they change its output, and the servers' cache key)."""
    fields = f"\0{model}\0{dtype or 'float32'}\0{min_pixels or 0}\0{max_pixels or 0}"
    key = content_id(item) + fields.encode()
    if item.HasField("video"):
        key += b"\0video\0" + item.video.SerializeToString(deterministic=True)
    return key


# A video item weighs one unit of the load bound per this many encoded bytes (an image weighs 1):
# its frames' decode and processing grow with its length, which its bytes follow.
VIDEO_WEIGHT_BYTES = 1 << 20
# A video sent by path or URL, whose size the router does not read.
VIDEO_URL_WEIGHT = 8


def item_weight(item: Any) -> int:
    """What one item counts in its member's load: 1 for an image, a video by its size."""
    if not item.HasField("video"):
        return 1
    if item.WhichOneof("source") != "data":
        return VIDEO_URL_WEIGHT
    return max(1, -(-len(item.data) // VIDEO_WEIGHT_BYTES))


def score(member: str, key: bytes) -> int:
    """The member's rendezvous weight for key (64-bit xxh3 of both, the member name first)."""
    return xxhash.xxh3_64_intdigest(key, seed=xxhash.xxh3_64_intdigest(member.encode()))


def order(key: bytes, members: Iterable[str]) -> list[str]:
    """The key's preference order: highest weight first, ties broken by name."""
    return sorted(members, key=lambda m: (-score(m, key), m))


def bound(total_in_flight: int, members: int, load_factor: float, floor: int) -> int:
    """The most in-flight items one member may hold when one more is placed.

    Max(floor, ceil(load_factor * (total + 1) / members))."""
    if members <= 0:
        return floor
    return max(floor, math.ceil(load_factor * (total_in_flight + 1) / members))


class Choice(NamedTuple):
    """Where one key goes.

    ``target``, or with ``wait`` the member it waits for; ``spilled``: past its first choice, on a
    member holding no copy we know of (it will miss); ``first``: its first choice."""

    target: str
    spilled: bool
    wait: bool
    first: str


def choose(key: bytes, members: Sequence[str], in_flight: Mapping[str, int],
           load_factor: float, floor: int, holders: Collection[str] = (),
           wait: bool = False, waiting: Mapping[str, int] | None = None) -> Choice:
    """Under the bound.

    The least loaded of ``holders`` (the members this router placed key on recently; ties by the
    key's order); else, with ``wait``, a wait for the holder with the fewest items ``waiting`` for
    it among those with fewer waiting than in flight (it frees a slot soon); else the first member
    in the key's order under the bound. With load_factor >= 1 some member is always below the bound
    (the bounds add up to more than the load); otherwise the first choice."""
    if not members:
        raise ValueError("no members to place on")
    ranked = order(key, members)
    total = sum(in_flight.get(m, 0) for m in members)
    cap = bound(total, len(members), load_factor, floor)
    under = [m for m in ranked if in_flight.get(m, 0) < cap]
    held = [m for m in under if m in holders]
    if held:  # stable: the order breaks ties
        return Choice(min(held, key=lambda m: in_flight.get(m, 0)), False, False, ranked[0])
    queued = waiting or {}
    soon = [m for m in ranked if m in holders and queued.get(m, 0) < in_flight.get(m, 0)]
    if wait and soon:
        return Choice(min(soon, key=lambda m: queued.get(m, 0)), False, True, ranked[0])
    if under:
        return Choice(under[0], under[0] != ranked[0], False, ranked[0])
    return Choice(ranked[0], False, False, ranked[0])


MAX_HOLDERS = 8  # members remembered per key (a hot image's copies; older ones drop out)


class Affinity:
    """Which members this router placed its most recent keys on.

    For each of its ``capacity`` most recent keys, the members it was placed on (whose pixel caches
    likely hold the key), each with the member's incarnation: a member that rejoins may have
    restarted with an empty cache, and its older entries no longer count. Keys are kept as 64-bit
    hashes (a collision only costs a cache miss)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._keys: OrderedDict[int, tuple[tuple[str, int], ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def holders(self, key: bytes, incarnation: Mapping[str, int]) -> list[str]:
        """The members key was placed on that may still hold it.

        Only those in ``incarnation`` (target -> its current incarnation) that have not rejoined
        since."""
        held = self._keys.get(xxhash.xxh3_64_intdigest(key), ())
        return [t for t, n in held if incarnation.get(t) == n]

    def add(self, key: bytes, target: str, incarnation: int) -> None:
        """key was placed on target (most recent first when the memory is full)."""
        if not self.capacity:
            return
        h = xxhash.xxh3_64_intdigest(key)
        held = self._keys.pop(h, ())
        # the MAX_HOLDERS most recent: members that come and go under new names add up
        self._keys[h] = (*(p for p in held if p[0] != target),
                         (target, incarnation))[-MAX_HOLDERS:]
        if len(self._keys) > self.capacity:
            self._keys.popitem(last=False)

    def forget(self, key: bytes, target: str) -> None:
        """The call that carried key to target failed: it holds no copy we know of."""
        h = xxhash.xxh3_64_intdigest(key)
        held = self._keys.get(h)
        if held is not None:
            self._keys[h] = tuple(p for p in held if p[0] != target)
