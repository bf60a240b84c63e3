"""Typed errors of the public API."""

from __future__ import annotations

from typing import Any


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


class CompactFormatError(UnsupportedCallError):
    """An output the compact format (``encoding="uint8+lut"``) cannot carry exactly.

    Its values are not one 256-entry table per channel applied to the resized uint8 pixels (a
    family or call whose output is not such a function); the float dtypes still serve it."""


class OutputTooLargeError(InvalidImageError):
    """The output would exceed a caller's byte limit.

    Raised from the plan, before decoding. ``index`` is the image at which the running total
    crosses ``limit``; ``hint`` ends the message (how to raise it)."""

    def __init__(self, index: int, nbytes: int, limit: int, hint: str = "") -> None:
        self.nbytes = nbytes
        self.limit = limit
        super().__init__(index, f"the output would be {nbytes} bytes, over the limit of "
                                f"{limit} bytes{hint}")


class InvalidVideoError(ValueError):
    """An input video cannot be processed. The message starts with ``video <index>:``."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"video {index}: {problem}")


class UnsupportedVideoError(InvalidVideoError):
    """A video whose container or codec smg-fast does not decode (refused from its header)."""


class VideoTooLargeError(OutputTooLargeError, InvalidVideoError):
    """A video call's output would exceed its byte limit: both errors' kind, ``video <index>:``."""

    def __init__(self, index: int, nbytes: int, limit: int, hint: str = "") -> None:
        self.index = index
        self.nbytes = nbytes
        self.limit = limit
        self.problem = (f"the output would be {nbytes} bytes, over the limit of {limit} "
                        f"bytes{hint}")
        ValueError.__init__(self, f"video {index}: {self.problem}")


class FrameIndexError(InvalidVideoError, IndexError):
    """A frame index outside the video's frames, refused before any frame is decoded.

    An IndexError too: transformers' video processors index the frames and raise that."""


# Wire names that lived here; they are smg_fast._service.wire's now (kept until REMOVED_IN).
_MOVED_TO_WIRE = ("RETRYABLE_KEY", "CALLER_KEY", "MAX_CALLER_LEN", "MAX_ITEMS", "too_many_items")


def __getattr__(name: str) -> Any:
    """The wire names' old home: warns (DeprecationWarning) and returns smg_fast._service.wire's."""
    if name not in _MOVED_TO_WIRE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from ._deprecated import REMOVED_IN
    from ._service import wire

    warnings.warn(f"smg_fast.errors.{name} is deprecated and will be removed in smg-fast "
                  f"{REMOVED_IN}: it is smg_fast._service.wire.{name} (the wire protocol's "
                  "names; the trailer and metadata keys are documented in docs/fleet.md)",
                  DeprecationWarning, stacklevel=2)
    return getattr(wire, name)
