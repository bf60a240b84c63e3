"""Idefics3's size rules (transformers' float arithmetic) and its patch count without pixels."""

from __future__ import annotations

import math
from typing import Any

MAX_SIDE = 4096  # transformers' MAX_IMAGE_SIZE: no side of the first resize passes it


def longest_edge_size(height: int, width: int, longest: int) -> tuple[int, int]:
    """(height, width) of the first resize, in transformers' float arithmetic.

    The longer side becomes longest (up or down), the other side is truncated and made even;
    then, past MAX_SIDE, scaled under it (truncated); no side below 1."""
    aspect = width / height
    if width >= height:
        width = longest
        height = int(width / aspect)
        height += height % 2
    else:
        height = longest
        width = int(height * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    aspect = width / height
    if width >= height and width > MAX_SIDE:
        width = MAX_SIDE
        height = int(width / aspect)
    elif height > width and height > MAX_SIDE:
        height = MAX_SIDE
        width = int(height * aspect)
    return max(height, 1), max(width, 1)


def tile_multiple_size(height: int, width: int, tile: int) -> tuple[int, int]:
    """(height, width) of the second resize: both sides up to tile multiples.

    The longer side is rounded up, the other scaled from it (truncated), then rounded up."""
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    return height, width


def count_patches(dropin: Any, height: int, width: int,
                   kwargs: dict[str, Any]) -> tuple[int, int, int]:
    """get_number_of_image_patches: (frames, rows, cols), as transformers' method counts them.

    It counts the tiles from the first resize's sides (not the second resize's truncated side),
    and (0, 0, 0) without splitting; so does this."""
    if not kwargs.get("do_image_splitting", dropin.do_image_splitting):
        return 0, 0, 0
    tile = _longest(kwargs.get("max_image_size", dropin.max_image_size))
    size = kwargs.get("size", dropin.size)
    h, w = longest_edge_size(height, width, _longest(size))
    rows, cols = math.ceil(h / tile), math.ceil(w / tile)
    if rows > 1 or cols > 1:
        return rows * cols + 1, rows, cols
    return 0, 0, 0


def _longest(size: Any) -> int:
    """A {"longest_edge": n} dict (or transformers' SizeDict) as n."""
    return int(size["longest_edge"] if isinstance(size, dict) else size.longest_edge)


__all__ = ["MAX_SIDE", "count_patches", "longest_edge_size", "tile_multiple_size"]
