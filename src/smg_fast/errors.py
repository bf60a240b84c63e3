"""Typed errors of the public API."""

from __future__ import annotations


class InvalidImageError(ValueError):
    """An input image cannot be processed. The message starts with ``image <index>:``."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"image {index}: {problem}")
