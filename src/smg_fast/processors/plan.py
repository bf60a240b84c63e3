"""What a family's size rule produces for one image (``Plan``), and its first checks.

``check_aspect`` is the size check every family's rule starts with."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidImageError


@dataclass(frozen=True)
class Plan:
    """Sizes for one image: resize target, then the patch grid (which may include padding).

    ``pad_rows``: zero rows after the grid's patch rows (Gemma 4 pads each image to a fixed
    count)."""

    resize_w: int
    resize_h: int
    grid_h: int
    grid_w: int
    pad_rows: int = field(default=0, kw_only=True)
    # more resizes of the same source image, written after this one (a tiling family's
    # thumbnail tile); image_grid_thw keeps this plan's grid
    extra: tuple[Plan, ...] = field(default=(), kw_only=True)

    @property
    def parts(self) -> tuple[Plan, ...]:
        """This plan's own resize and grid, then its extra ones, in output order."""
        return (Plan(self.resize_w, self.resize_h, self.grid_h, self.grid_w), *self.extra)

    @property
    def cells(self) -> int:
        """Grid cells of every part together (the rows the resizes write)."""
        return self.grid_h * self.grid_w + sum(p.cells for p in self.extra)

    @property
    def rows(self) -> int:
        """Output rows of the image: every part's grid cells, then the zero rows."""
        return self.cells + self.pad_rows


def check_aspect(index: int, width: int, height: int, limit: float = 200) -> None:
    """InvalidImageError for a zero-size image or one whose aspect ratio passes limit."""
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    ratio = max(height, width) / min(height, width)
    if ratio > limit:
        raise InvalidImageError(index, f"absolute aspect ratio must be at most {limit:g}, "
                                       f"got {ratio:g} ({width}x{height})")


__all__ = ["Plan", "check_aspect"]
