"""Typed errors of the public API."""

from __future__ import annotations


class InvalidImageError(ValueError):
    """An input image cannot be processed. The message starts with ``image <index>:``."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"image {index}: {problem}")


class UnsupportedCallError(ValueError, TypeError):
    """A call smg-fast does not reproduce bit for bit.

    An option or input kind transformers' class computes differently; ``smg_fast.hf`` hands such
    calls to that class."""


class OutputTooLargeError(InvalidImageError):
    """The output would exceed a caller's byte limit.

    Raised from the plan, before decoding. ``index`` is the image at which the running total crosses
    ``limit``."""

    def __init__(self, index: int, nbytes: int, limit: int) -> None:
        self.nbytes = nbytes
        self.limit = limit
        super().__init__(index, f"the output would be {nbytes} bytes, over the limit of "
                                f"{limit} bytes")
