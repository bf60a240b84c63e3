"""Tile grids: an image resized onto a grid of fixed-size tiles, plus a whole-image thumbnail.

The closest-aspect-ratio rule of InternVL and GOT-OCR 2 (transformers' GotOcr2 image
processors): the candidates are every (columns, rows) with min_tiles <= columns * rows <=
max_tiles, listed columns-major and then stably ordered by tile count; the first with the
smallest |width / height - columns / rows| wins, and a later candidate with exactly the same
difference replaces it while the image's area exceeds half the area of that candidate's canvas.
No candidate (max_tiles < min_tiles, or max_tiles < 1) leaves one tile. The image is resized to
the whole canvas and cut into its tiles row by row (the patch layout does the cutting while it
writes the output); with more than one tile, a thumbnail (the whole image resized to one tile)
follows them."""

from __future__ import annotations

from functools import lru_cache

from .plan import Plan

MAX_TILES = 1024  # the largest max_tiles a config may set: bounds the candidate list and output


@lru_cache(maxsize=16)
def candidates(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """The (columns, rows) grids to choose from, in the order the rule reads them."""
    grids = [(c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
             if min_tiles <= c * r <= max_tiles]
    return tuple(sorted(grids, key=lambda g: g[0] * g[1]))  # sorted() is stable


def closest_grid(width: int, height: int, tile_w: int, tile_h: int, min_tiles: int,
                 max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of the grid whose aspect ratio is closest to width / height."""
    aspect = width / height
    area = width * height
    best, best_diff = (1, 1), float("inf")
    for cols, rows in candidates(min_tiles, max_tiles):
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile_h * tile_w * cols * rows:
            best = (cols, rows)
    return best


def tiled_plan(width: int, height: int, tile: int, min_tiles: int, max_tiles: int,
               thumbnail: bool = True) -> Plan:
    """The plan of a width x height image: its canvas of square tiles, then the thumbnail."""
    cols, rows = closest_grid(width, height, tile, tile, min_tiles, max_tiles)
    extra = (Plan(tile, tile, 1, 1),) if thumbnail and cols * rows > 1 else ()
    return Plan(cols * tile, rows * tile, rows, cols, extra)


__all__ = ["MAX_TILES", "candidates", "closest_grid", "tiled_plan"]
