"""Inputs every family's parity suite runs, with what transformers' class is given for each.

Encoded: the bytes and paths of photos (with and without transparency), an EXIF-rotated JPEG and a
16-bit PNG; smg-fast takes the encoded form, transformers' class the image load_image makes of
it. Arrays: a photo resized to edge sizes (channels last, said to both: tiny arrays are ambiguous),
a grey (H, W, 1) and a channels-first photo."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from transformers.image_utils import load_image

from support.images import encode


def encoded_cases(real_images: Any, exif_jpeg: Path,
                  names: tuple[str, ...] = ("rocket", "logo2")) -> list[tuple[str, Any, Any]]:
    """(label, smg-fast's input, transformers' input) for every encoded case."""
    cases = []
    for name in names:
        for kind, src in (("bytes", real_images.bytes(name)), ("str", str(real_images.path(name))),
                          ("path", real_images.path(name))):
            cases.append((f"{name}/{kind}", src, load_image(str(real_images.path(name)))))
    cases.append(("exif/bytes", exif_jpeg.read_bytes(), load_image(str(exif_jpeg))))
    cases.append(("exif/str", str(exif_jpeg), load_image(str(exif_jpeg))))
    data = encode(real_images.mode_image("I;16"), "PNG")
    cases.append(("png16", data, load_image(Image.open(io.BytesIO(data)))))
    return cases


def array_cases(real_images: Any, sizes: list[tuple[int, int]]) -> list[tuple[str, Any, dict]]:
    """(label, numpy array, call options for both) for every array case."""
    cases = []
    for w, h in sizes:
        arr = np.asarray(real_images.rgb("astronaut").resize((w, h), Image.Resampling.BICUBIC))
        cases.append((f"{w}x{h}", arr, {"input_data_format": "channels_last"}))
    cases.append(("grey", np.asarray(real_images.open("camera"))[:, :, None].copy(), {}))
    chw = real_images.rgb_array("chelsea").transpose(2, 0, 1)
    cases.append(("chw", np.ascontiguousarray(chw), {}))
    return cases
