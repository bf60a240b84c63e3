"""A built-in test image.

The CLIs, the server's warm-up and the load generator work with it without an image of the user's
own."""

from __future__ import annotations

import io

import numpy as np


def sample_image(width: int = 1920, height: int = 1080) -> np.ndarray:
    """A deterministic RGB uint8 (H, W, 3) image with gradients and hard edges.

    It exercises every filter tap."""
    y, x = np.mgrid[0:height, 0:width]
    r = (x * 255 // max(1, width - 1)).astype(np.uint8)
    g = (y * 255 // max(1, height - 1)).astype(np.uint8)
    b = (((x // 37) + (y // 23)) % 2 * 200 + (x * y) % 56).astype(np.uint8)
    return np.stack([r, g, b], axis=2)


def sample_image_bytes(width: int = 1920, height: int = 1080, fmt: str = "JPEG") -> bytes:
    """The test pattern encoded (JPEG quality 90 by default, or PNG): what a caller sends."""
    from PIL import Image

    buf = io.BytesIO()
    kwargs = {"quality": 90} if fmt.upper() == "JPEG" else {}
    Image.fromarray(sample_image(width, height)).save(buf, fmt, **kwargs)
    return buf.getvalue()


