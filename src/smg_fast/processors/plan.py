"""What a family's size rule produces for one image (``Plan``), and its first checks.

``check_aspect`` is the size check every family's rule starts with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..errors import InvalidImageError


@dataclass(frozen=True)
class Plan:
    """Sizes for one image: resize target, then the patch grid (which may include padding).

    ``pad_rows``: zero rows after the grid's patch rows (Gemma 4 pads each image to a fixed
    count). ``left`` / ``top``: where the resize sits on its grid's canvas when it is placed
    there (LLaVA-NeXT's centred tiles: the canvas around it is pixel 0); 0, 0 otherwise, the
    grid's cells past the resize padding."""

    resize_w: int
    resize_h: int
    grid_h: int
    grid_w: int
    pad_rows: int = field(default=0, kw_only=True)
    # more resizes of the same source image, written after this one (a tiling family's
    # thumbnail tile); image_grid_thw keeps this plan's grid
    extra: tuple[Plan, ...] = field(default=(), kw_only=True)
    left: int = field(default=0, kw_only=True)
    top: int = field(default=0, kw_only=True)
    # the image's image_grid_thw row where it is not [1, grid_h, grid_w] (LLaVA's: its size)
    grid_thw: tuple[int, int, int] | None = field(default=None, kw_only=True)
    # the source first padded to a centred square of this RGB colour, then resized (the images
    # of OneVision's multi-image samples)
    fill: tuple[int, int, int] | None = field(default=None, kw_only=True)
    # rows before the parts that the family's Processor.finish writes from them (Phi-4's global
    # image, resized from its tiles)
    lead_rows: int = field(default=0, kw_only=True)

    @property
    def placed(self) -> bool:
        """Whether the resize is placed off the canvas's top left corner."""
        return bool(self.left or self.top)

    @property
    def thw(self) -> tuple[int, int, int]:
        """The image's row of image_grid_thw."""
        return self.grid_thw or (1, self.grid_h, self.grid_w)

    @property
    def parts(self) -> tuple[Plan, ...]:
        """This plan's own resize and grid, then its extra ones, in output order."""
        return (dataclasses.replace(self, pad_rows=0, extra=(), grid_thw=None, lead_rows=0),
                *self.extra)

    @property
    def cells(self) -> int:
        """Grid cells of every part together, and the lead rows (the rows written)."""
        return self.lead_rows + self.grid_h * self.grid_w + sum(p.cells for p in self.extra)

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
