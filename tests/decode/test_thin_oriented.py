"""Images one pixel tall or wide, turned by an EXIF orientation (5-8 swap the sides).

The turned view of the decoded pixels keeps a meaningless stride on its length-1 axis, which the
native core must accept. Against transformers (load_image turns the image, then the PIL processor).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import smg_fast


def _with_orientation(mode: str, size: tuple[int, int], fmt: str, orientation: int) -> bytes:
    rng = np.random.default_rng(size[0] * 10 + size[1])
    shape = (size[1], size[0]) + ((3,) if mode == "RGB" else ())
    img = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    img.save(buf, fmt, exif=exif.tobytes(), **({"quality": 95} if fmt == "JPEG" else {}))
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
@pytest.mark.parametrize("mode", ["L", "RGB"])
@pytest.mark.parametrize("size", [(9, 1), (1, 9), (1, 1)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("orientation", [5, 6, 7, 8])
def test_thin_turned_images(hf_qwen, hf_run, fmt, mode, size, orientation):
    from transformers.image_utils import load_image

    data = _with_orientation(mode, size, fmt, orientation)
    want, grid = hf_run(hf_qwen("qwen2_vl"), load_image(Image.open(io.BytesIO(data))))
    out = smg_fast.load_processor("qwen2_vl")(data)
    assert np.array_equal(out["image_grid_thw"], grid)
    assert np.array_equal(out["pixel_values"], want)
