"""Tile grids: an image resized onto a grid of fixed-size tiles, plus one whole-image tile.

The one tile engine the tiling families configure: a grid solver (the closest aspect ratio of
InternVL, or the best resolution of LLaVA-NeXT / OneVision), where the whole-image tile goes
(a thumbnail after the tiles, or a base image before them), and how the image sits on its grid's
canvas (stretched over it, or fitted inside it and centred, the rest zero pixels).

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
follows them.

The best-resolution rule of LLaVA-NeXT (transformers' select_best_resolution): among the
(height, width) resolutions, the one whose aspect-preserving downscale of the image (each side
truncated) keeps the most pixels (at most the image's own), ties going to the least unused
canvas, the first of equals winning. The image is then fitted inside it (get_patch_output_size:
the tighter side takes the canvas's, the other is scaled and rounded up, at most the canvas's),
centred (the odd padding pixel after), and the canvas is cut into tiles row by row (the native
core places the resize on the canvas while it writes the tiles: Pipeline.run's left / top); a
base image (the whole image resized to one tile) goes before them.

The best-fit rule of Llama 4 (transformers' get_best_fit over find_supported_resolutions): the
canvases are every (rows, columns) factor pair of 1..max_tiles tiles, in the order that code
lists them (tile counts from the most down, factor pairs by rows ascending, gathered by their
rows / columns ratio in the order a ratio first appears); each canvas's scale is the smaller of
its sides' float32 ratios to the image's; the smallest scale of at least 1 wins, else the
largest, and among canvases of that scale the first of the least area. The image is resized
without distortion to fit the canvas (never upscaled past the tile side, each side floored, at
least 1) and sits in the top left corner on zero pixels; with more than one tile, a global tile
(the whole image resized to one tile) follows them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .. import _native
from .plan import Plan

MAX_TILES = 1024  # the largest max_tiles a config may set: bounds the candidate list and output


def check_tile_bounds(min_tiles: int, max_tiles: int) -> None:
    """ValueError unless max_tiles is an int of at most MAX_TILES (min_tiles an int).

    Checked before any grid is listed: the bounds may come from a call or an attribute."""
    for name, value in (("min_tiles", min_tiles), ("max_tiles", max_tiles)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if max_tiles > MAX_TILES:
        raise ValueError(f"max tiles must be at most {MAX_TILES}, got {max_tiles}")


def _rows(cols: int, min_tiles: int, max_tiles: int, most: int) -> range:
    """The rows r <= most with min_tiles <= cols * r <= max_tiles, ascending."""
    return range(max(1, -(-min_tiles // cols)), min(most, max_tiles // cols) + 1)


@lru_cache(maxsize=16, typed=True)  # 12.0 is not 12: checked, not a hit
def candidates(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """The (columns, rows) grids to choose from, in the order transformers' rule reads them.

    Columns-major (each column count's rows ascending), then stably by tile count; each column
    count's rows are listed directly (no scan of every pair), so it takes O(max_tiles log
    max_tiles) steps."""
    check_tile_bounds(min_tiles, max_tiles)
    min_tiles, max_tiles = int(min_tiles), int(max_tiles)
    grids = [(c, r) for c in range(1, max_tiles + 1) for r in _rows(c, min_tiles, max_tiles,
                                                                       max_tiles)]
    return tuple(sorted(grids, key=lambda g: g[0] * g[1]))  # sorted() is stable


@lru_cache(maxsize=16, typed=True)  # 12.0 is not 12: checked, not a hit
def set_order_candidates(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """The same grids in the order InternVL's original code reads them (vLLM runs it).

    That code collects them in a Python set, filled for n = min_tiles..max_tiles with every
    (columns, rows) of sides up to n, and then sorts the set's iteration order stably by tile
    count. A set's order depends only on the sequence of its first insertions (adding a member
    again changes nothing), so the grids are added here in that sequence: at the first n, every
    grid of sides up to n; at each later n, those whose larger side is n ((1, n), ..., (n - 1, n),
    then (n, 1), ..., (n, n)). Only grids within the bounds are visited: O(max_tiles log
    max_tiles) steps, not the original's O(max_tiles ** 3)."""
    check_tile_bounds(min_tiles, max_tiles)
    min_tiles, max_tiles = int(min_tiles), int(max_tiles)
    grids: set[tuple[int, int]] = set()
    first = max(min_tiles, 1)
    for n in range(first, max_tiles + 1):
        if n == first:
            for c in range(1, n + 1):
                grids.update((c, r) for r in _rows(c, min_tiles, max_tiles, n))
            continue
        cols = range(max(1, -(-min_tiles // n)), min(n - 1, max_tiles // n) + 1)
        grids.update((c, n) for c in cols)
        grids.update((n, r) for r in _rows(n, min_tiles, max_tiles, n))
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


def best_resolution(width: int, height: int,
                    resolutions: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(height, width) of the resolution among ``resolutions`` ((height, width) pairs) to use."""
    return _best_resolution(width, height, tuple(tuple(r) for r in resolutions))


@lru_cache(maxsize=256)
def _best_resolution(width: int, height: int,
                     resolutions: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """best_resolution, kept per size: a call plans, counts tokens and tiles of each image."""
    best = resolutions[0]
    most, least_waste = 0, math.inf
    for res_h, res_w in resolutions:
        scale = min(res_w / width, res_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        waste = res_w * res_h - kept
        if kept > most or (kept == most and waste < least_waste):
            best, most, least_waste = (res_h, res_w), kept, waste
    return best


def fit_inside(width: int, height: int, canvas_w: int, canvas_h: int) -> tuple[int, int]:
    """(width, height) of the image scaled to fit the canvas: one side the canvas's."""
    scale_w, scale_h = canvas_w / width, canvas_h / height
    if scale_w < scale_h:
        return canvas_w, min(math.ceil(height * scale_w), canvas_h)
    return min(math.ceil(width * scale_h), canvas_w), canvas_h


def anyres_plan(width: int, height: int, tile: int,
                resolutions: Sequence[tuple[int, int]]) -> Plan:
    """The plan of a width x height image: a base tile, then its best resolution's tiles.

    The tiles' canvas is the best resolution (a multiple of tile), the image fitted inside it
    and centred. ``grid_thw`` is [1, height, width]: the image's own size (``image_sizes``)."""
    res_h, res_w = best_resolution(width, height, resolutions)
    w, h = fit_inside(width, height, res_w, res_h)
    tiles = Plan(w, h, res_h // tile, res_w // tile, left=(res_w - w) // 2,
                 top=(res_h - h) // 2)
    return Plan(tile, tile, 1, 1, extra=(tiles,), grid_thw=(1, height, width))


@lru_cache(maxsize=16)
def factor_canvases(max_tiles: int) -> tuple[tuple[int, int], ...]:
    """(rows, columns) of every canvas of at most max_tiles tiles, in Llama 4's order."""
    by_ratio: dict[float, list[tuple[int, int]]] = {}
    for count in range(max_tiles, 0, -1):
        for rows in range(1, count + 1):
            if count % rows == 0:
                by_ratio.setdefault(rows / (count // rows), []).append((rows, count // rows))
    return tuple(pair for pairs in by_ratio.values() for pair in pairs)


def best_fit(width: int, height: int, tile: int,
             canvases: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(rows, columns) of the canvas among ``canvases`` a width x height image goes to."""
    return _best_fit(width, height, tile, tuple(tuple(c) for c in canvases))


@lru_cache(maxsize=256)
def _best_fit(width: int, height: int, tile: int,
              canvases: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    """best_fit, kept per size: its float32 scales are NumPy scalars, slow to compute each time."""
    w32, h32 = np.float32(width), np.float32(height)
    scales = [min(np.float32(c * tile) / w32, np.float32(r * tile) / h32) for r, c in canvases]
    up = [s for s in scales if s >= 1]
    chosen = min(up) if up else max(scales)
    fits = [(r * c, i) for i, (r, c) in enumerate(canvases) if scales[i] == chosen]
    return canvases[min(fits)[1]]


def fit_floor(width: int, height: int, canvas_w: int, canvas_h: int) -> tuple[int, int]:
    """(width, height) of the image scaled to fit the canvas, the other side floored, >= 1."""
    scale_w, scale_h = canvas_w / width, canvas_h / height
    if scale_w < scale_h:
        w, h = canvas_w, min(math.floor(height * scale_w), canvas_h)
    else:
        w, h = min(math.floor(width * scale_h), canvas_w), canvas_h
    return max(w, 1), max(h, 1)


def best_fit_plan(width: int, height: int, tile: int, max_tiles: int) -> Plan:
    """The plan of a width x height image: its best-fit canvas's tiles, then a global tile.

    The resize sits in the canvas's top left corner, the canvas past it pixel 0."""
    rows, cols = best_fit(width, height, tile, factor_canvases(max_tiles))
    w, h = fit_floor(width, height, min(max(width, tile), cols * tile),
                     min(max(height, tile), rows * tile))
    extra = (Plan(tile, tile, 1, 1),) if rows * cols > 1 else ()
    return Plan(w, h, rows, cols, extra=extra)


def square_source(src: np.ndarray, fmt: Any, fill: tuple[int, int, int]) -> np.ndarray:
    """src (read in fmt) as RGB, centred on a square of colour fill as long as its longer side.

    As transformers' pad_to_square: the shorter side's padding split with the odd pixel after;
    a square image is returned as RGB unpadded."""
    channels = 1 if src.ndim == 2 else src.shape[2]
    if fmt is None:
        fmt = _native.PixelFormat.RGB if channels == 3 else _native.PixelFormat.RGBX
    rgb = src if fmt == _native.PixelFormat.RGB else _native.to_rgb(src, fmt)
    h, w = rgb.shape[:2]
    if h == w:
        return rgb
    side = max(h, w)
    out = np.empty((side, side, 3), np.uint8)
    out[...] = np.asarray(fill, np.uint8)
    top, left = (side - h) // 2, (side - w) // 2
    out[top:top + h, left:left + w] = rgb
    return out


__all__ = ["MAX_TILES", "anyres_plan", "best_fit", "best_fit_plan", "best_resolution",
           "check_tile_bounds",
           "candidates", "closest_grid", "factor_canvases", "fit_floor", "fit_inside",
           "set_order_candidates", "square_source", "tiled_plan"]
