"""Tile grids: an image resized onto a grid of fixed-size tiles, plus a whole-image thumbnail.

The closest-aspect-ratio rule of InternVL and GOT-OCR 2 (transformers' GotOcr2 image
processors): the candidates are every (columns, rows) with min_tiles <= columns * rows <=
max_tiles, listed columns-major and then stably ordered by tile count; the first with the
smallest |width / height - columns / rows| wins, and a later candidate with exactly the same
difference replaces it while the image's area exceeds half the area of that candidate's canvas.
No candidate (max_tiles < min_tiles, or max_tiles < 1) leaves one tile. InternVL's original
code (which vLLM runs for the original checkpoints) reads the same candidates in another order
within a tile count (``set_order_candidates``). The image is resized to
the whole canvas and cut into its tiles row by row (the patch layout does the cutting while it
writes the output); with more than one tile, a thumbnail (the whole image resized to one tile)
follows them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from .plan import Plan

MAX_TILES = 1024  # the largest max_tiles a config may set: bounds the candidate list and output


@lru_cache(maxsize=16)
def candidates(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """The (columns, rows) grids to choose from, in the order transformers' rule reads them."""
    grids = [(c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
             if min_tiles <= c * r <= max_tiles]
    return tuple(sorted(grids, key=lambda g: g[0] * g[1]))  # sorted() is stable


@lru_cache(maxsize=16)
def set_order_candidates(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """The same grids in the order InternVL's original code reads them (vLLM runs it).

    That code collects them in a Python set, filled for n = min_tiles..max_tiles with every
    (columns, rows) of sides up to n, and then sorts the set's iteration order stably by tile
    count; the set is filled here in the same sequence, so it iterates alike."""
    grids = set()
    for n in range(min_tiles, max_tiles + 1):
        for c in range(1, n + 1):
            for r in range(1, n + 1):
                if min_tiles <= c * r <= max_tiles:
                    grids.add((c, r))
    return tuple(sorted(grids, key=lambda g: g[0] * g[1]))


def closest_grid(width: int, height: int, tile_w: int, tile_h: int,
                 grids: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(columns, rows) of the grid among ``grids`` (in order) closest to width / height."""
    aspect = width / height
    area = width * height
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile_h * tile_w * cols * rows:
            best = (cols, rows)
    return best


def tiled_plan(width: int, height: int, tile: int, grids: Sequence[tuple[int, int]],
               thumbnail: bool = True) -> Plan:
    """The plan of a width x height image: its canvas of square tiles, then the thumbnail."""
    cols, rows = closest_grid(width, height, tile, tile, grids)
    extra = (Plan(tile, tile, 1, 1),) if thumbnail and cols * rows > 1 else ()
    return Plan(cols * tile, rows * tile, rows, cols, extra=extra)


__all__ = ["MAX_TILES", "candidates", "closest_grid", "set_order_candidates", "tiled_plan"]
