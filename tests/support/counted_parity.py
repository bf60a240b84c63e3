"""Parity helpers for families whose output is whole images or tiles plus a count per image.

Such a family returns pixel_values (N, 3, S, S) and one int64 count per image (InternVL's
num_patches); ``CORPUS`` names the inputs every such family is compared on, and
``corpus_input`` gives each as smg-fast reads it and as transformers' load_image gives it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from transformers.image_utils import load_image

from .images import MODE_KINDS, REAL_IMAGE_NAMES, RealImages, encode

ENCODED = ("rocket", "coffee", "logo2")  # a JPEG, a PNG, a PNG with transparency
CORPUS = ([f"real:{n}" for n in REAL_IMAGE_NAMES] + [f"mode:{k}" for k in MODE_KINDS]
          + [f"{how}:{n}" for how in ("bytes", "str", "path") for n in ENCODED]
          + ["exif:str", "exif:bytes", "png16", "array:grey", "array:chw", "array:rgba"])


def corpus_input(images: RealImages, exif_jpeg: Path, name: str) -> tuple[Any, Any]:
    """(what smg-fast is given, the image transformers is given) for a CORPUS name."""
    kind, _, arg = name.partition(":")
    if kind == "real":
        return images.open(arg), images.open(arg)
    if kind == "mode":
        return images.mode_image(arg), images.mode_image(arg)
    if kind in ("bytes", "str", "path"):
        src = {"bytes": images.bytes, "str": lambda n: str(images.path(n)),
               "path": images.path}[kind](arg)
        return src, load_image(str(images.path(arg)))
    if kind == "exif":
        return (exif_jpeg.read_bytes() if arg == "bytes" else str(exif_jpeg),
                load_image(str(exif_jpeg)))
    if kind == "png16":
        data = encode(images.mode_image("I;16"), "PNG")
        return data, load_image(Image.open(io.BytesIO(data)))
    if kind == "array":  # (H, W, 1) grey, channels-first RGB, RGBA
        arr = {"grey": lambda: np.asarray(images.open("camera").resize((700, 300)))[:, :, None],
               "chw": lambda: images.rgb_array("chelsea").transpose(2, 0, 1),
               "rgba": lambda: np.asarray(images.mode_image("RGBA"))}[arg]()
        return np.ascontiguousarray(arr), np.ascontiguousarray(arr)
    raise KeyError(name)


class Counted:
    """reference() and check() for a family whose per-image count is the output ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key

    def reference(self, ref: Any, images: Any, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
        """transformers' pixel_values and its per-image count, as NumPy arrays."""
        out = ref(images, return_tensors="np", **kw)
        return np.asarray(out["pixel_values"]), np.asarray(out[self.key])

    def check(self, out: Any, want: tuple[np.ndarray, np.ndarray]) -> None:
        """pixel_values float32 and equal to the value, the count int64 and equal."""
        pv, counts = want
        got = np.asarray(out["pixel_values"])
        assert got.dtype == np.float32 and got.shape == pv.shape, (got.shape, pv.shape)
        bad = got != pv
        assert not bad.any(), f"{bad.mean():.4%} of float32 values differ"
        assert np.asarray(out[self.key]).dtype == np.int64
        assert np.asarray(out[self.key]).tolist() == counts.tolist()


__all__ = ["CORPUS", "Counted", "ENCODED", "corpus_input"]
