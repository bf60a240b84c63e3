"""The real test images, images derived from them in every PIL mode, and encoding helpers.

The photos ship in installed packages (scikit-image, matplotlib, scikit-learn); the derived
images cover every PIL mode and transparency case the processors must handle.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
from PIL import Image


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not installed (needed for its sample images)")
    return Path(list(spec.submodule_search_locations)[0])


def _real_image_paths() -> dict[str, Path]:
    skimage = _package_dir("skimage") / "data"
    mpl = _package_dir("matplotlib") / "mpl-data" / "sample_data"
    sklearn = _package_dir("sklearn") / "datasets" / "images"
    return {
        "astronaut": skimage / "astronaut.png",  # RGB 512x512
        "chelsea": skimage / "chelsea.png",  # RGB 451x300
        "coffee": skimage / "coffee.png",  # RGB 600x400
        "camera": skimage / "camera.png",  # L 512x512
        "retina": skimage / "retina.jpg",  # RGB 1411x1411
        "rocket": skimage / "rocket.jpg",  # RGB 640x427
        "logo": skimage / "logo.png",  # RGBA 500x500
        "hubble": skimage / "hubble_deep_field.jpg",  # RGB 1000x872
        "grace_hopper": mpl / "grace_hopper.jpg",  # RGB 512x600
        "logo2": mpl / "logo2.png",  # RGBA with real transparency
        "china": sklearn / "china.jpg",  # RGB 640x427
        "flower": sklearn / "flower.jpg",  # RGB 640x427
    }


REAL_IMAGE_PATHS = _real_image_paths()
REAL_IMAGE_NAMES = tuple(REAL_IMAGE_PATHS)

# Images derived from real photos, one per PIL mode / transparency case the pipeline handles.
MODE_KINDS = (
    "P",  # palette, no transparency
    "P_transparency",  # palette with a transparency index (info["transparency"] = int)
    "LA",  # grey + varying alpha
    "RGBA",  # colour + varying alpha (fully transparent, opaque and partial pixels)
    "RGB_colorkey",  # RGB with info["transparency"] = (r, g, b) colour key
    "CMYK",
    "I;16",  # 16-bit grey spanning values above 255
    "1",  # bilevel (dithered)
    "L",
)


class RealImages:
    """Access to the shipped sample images. Every call returns a fresh, fully loaded object."""

    names = REAL_IMAGE_NAMES
    mode_kinds = MODE_KINDS

    def path(self, name: str) -> Path:
        p = REAL_IMAGE_PATHS[name]
        if not p.is_file():
            raise FileNotFoundError(p)
        return p

    def open(self, name: str) -> Image.Image:
        with Image.open(self.path(name)) as im:
            im.load()
            return im.copy()

    def rgb(self, name: str) -> Image.Image:
        return self.open(name).convert("RGB")

    def rgb_array(self, name: str) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.rgb(name)))

    def bytes(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def mode_image(self, kind: str) -> Image.Image:
        return make_mode_image(self, kind)


def _alpha_from_photo(images: RealImages, size: tuple[int, int]) -> np.ndarray:
    """A real-content alpha plane with exact 0 and 255 regions as well as partial values."""
    alpha = np.array(images.open("camera").resize(size, Image.Resampling.BILINEAR), dtype=np.uint8)
    w, h = size
    alpha[: h // 6, :] = 0  # fully transparent band
    alpha[-(h // 6) :, :] = 255  # fully opaque band
    return alpha


def make_mode_image(images: RealImages, kind: str) -> Image.Image:
    """The image of one MODE_KINDS case, derived from real photos."""
    base = images.rgb("chelsea")  # 451x300 real photo
    if kind == "P":
        return images.rgb("rocket").quantize(256)
    if kind == "P_transparency":
        p = base.quantize(64)
        counts = np.bincount(np.asarray(p).ravel(), minlength=256)
        p.info["transparency"] = int(counts.argmax())  # the most common index: many pixels
        return p
    if kind == "LA":
        grey = np.asarray(base.convert("L"))
        alpha = _alpha_from_photo(images, base.size)
        return Image.merge("LA", (Image.fromarray(grey), Image.fromarray(alpha)))
    if kind == "RGBA":
        rgba = base.convert("RGBA")
        rgba.putalpha(Image.fromarray(_alpha_from_photo(images, base.size)))
        return rgba
    if kind == "RGB_colorkey":
        rgb = images.rgb("coffee")
        arr = np.asarray(rgb).reshape(-1, 3).astype(np.int32)
        packed = (arr[:, 0] << 16) | (arr[:, 1] << 8) | arr[:, 2]
        colors, counts = np.unique(packed, return_counts=True)
        top = int(colors[counts.argmax()])  # the most common colour: many keyed pixels
        key = (top >> 16, (top >> 8) & 255, top & 255)
        rgb.info["transparency"] = key
        return rgb
    if kind == "CMYK":
        return base.convert("CMYK")
    if kind == "I;16":
        grey = np.asarray(base.convert("L")).astype(np.uint16)
        im = Image.fromarray(grey * 2 + 40)  # 40..550: both below and above 255
        assert im.mode == "I;16", im.mode
        return im
    if kind == "1":
        return images.open("camera").convert("1")
    if kind == "L":
        return images.open("camera")
    raise KeyError(kind)


def encode(image: Image.Image, fmt: str = "PNG", **kwargs) -> bytes:
    """image saved as fmt (Pillow's save options in kwargs), as bytes."""
    buf = io.BytesIO()
    image.save(buf, fmt, **kwargs)
    return buf.getvalue()
