"""Typed errors of the public API, and the wire names and limits the server, the router and the
routing library share: the trailer a RESOURCE_EXHAUSTED answer carries, the caller a router
forwards for, the largest request a server takes."""

from __future__ import annotations

# Trailing metadata on every RESOURCE_EXHAUSTED answer of a server or router: "1" when the
# request may succeed later or elsewhere (admission, shm room, memory), "0" when it can never
# fit (a size limit). Here, below the server and the routing, so that both read one name.
RETRYABLE_KEY = "smg-fast-retryable"
# Request metadata a router sends naming its own caller; a worker honours it only from a
# --trusted-router-peer (server/callers.py). Longer names are cut (the router sends a peer
# address or a hash).
CALLER_KEY = "smg-fast-caller"
MAX_CALLER_LEN = 256

# Images per Preprocess request: more is INVALID_ARGUMENT from a server, a router and the routing
# library alike (here for the same reason as RETRYABLE_KEY).
MAX_ITEMS = 1024


def too_many_items(n: int) -> str:
    return f"{n} items, at most {MAX_ITEMS} per request"


class InvalidImageError(ValueError):
    """An input image cannot be processed. The message starts with ``image <index>:``."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"image {index}: {problem}")


class UnsupportedCallError(ValueError, TypeError):
    """A call smg-fast does not reproduce bit for bit (an option or input kind transformers'
    class computes differently); ``smg_fast.hf`` hands such calls to that class."""


class OutputTooLargeError(InvalidImageError):
    """The output would exceed a caller's byte limit; raised from the plan, before decoding.
    ``index`` is the image at which the running total crosses ``limit``."""

    def __init__(self, index: int, nbytes: int, limit: int) -> None:
        self.nbytes = nbytes
        self.limit = limit
        super().__init__(index, f"the output would be {nbytes} bytes, over the limit of "
                                f"{limit} bytes")
