"""What a family's size rule produces for one image (``Plan``), and its first checks.

``check_aspect`` is the size check every family's rule starts with."""

from __future__ import annotations

from dataclasses import dataclass

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
    pad_rows: int = 0

    @property
    def rows(self) -> int:
        """Output rows of the image: the grid's patches, then the zero rows."""
        return self.grid_h * self.grid_w + self.pad_rows


def check_aspect(index: int, width: int, height: int, limit: float = 200) -> None:
    """InvalidImageError for a zero-size image or one whose aspect ratio passes limit."""
    if width < 1 or height < 1:
        raise InvalidImageError(index, f"zero-size image ({width}x{height})")
    ratio = max(height, width) / min(height, width)
    if ratio > limit:
        raise InvalidImageError(index, f"absolute aspect ratio must be at most {limit:g}, "
                                       f"got {ratio:g} ({width}x{height})")


__all__ = ["Plan", "check_aspect"]
