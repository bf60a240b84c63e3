"""Fixtures of the parity tests: image and mode parameters, an EXIF JPEG, the reference.

Every real image and every PIL mode case as a parameter, an EXIF-rotated JPEG, and the
reference's pixel_values for any family.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from support.images import MODE_KINDS, REAL_IMAGE_NAMES

from smg_fast.testing.oracles import kimi_upstream


@pytest.fixture(params=REAL_IMAGE_NAMES)
def real_image_name(request) -> str:
    return request.param


@pytest.fixture(params=MODE_KINDS)
def mode_kind(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def exif_rotated_jpeg(tmp_path_factory, real_images) -> Path:
    """A real photo saved as JPEG with EXIF orientation 6 (rotate 90 CW to display)."""
    im = real_images.rgb("rocket")  # 640x427, not square, so a missed rotation changes the grid
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation
    path = tmp_path_factory.mktemp("exif") / "rocket_orientation6.jpg"
    im.save(path, "JPEG", quality=90, exif=exif)
    with Image.open(path) as check:
        assert check.getexif().get(0x0112) == 6
    return path


@pytest.fixture(scope="session")
def reference(hf_qwen, hf_run):
    """reference(family, image) -> the reference's pixel_values for the family's hub config.

    transformers' PIL processor for the Qwen families, the NumPy re-implementation for Kimi.
    """

    def pixel_values(family: str, image: Image.Image):
        if family == "kimi_k25":
            return kimi_upstream(image)[0]
        return hf_run(hf_qwen(family), image)[0]

    return pixel_values
