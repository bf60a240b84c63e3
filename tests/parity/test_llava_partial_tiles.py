"""LLaVA-NeXT pinpoints that are not whole tiles: refused per image, computed by transformers.

transformers resizes each partial tile of such a canvas on its own (shortest edge to the tile,
then a centre crop), which smg-fast does not compute: its processor raises UnsupportedCallError
for an image whose best resolution is such a pinpoint and computes the others; the drop-ins hand
those calls to transformers' class. transformers' class defaults (224-pixel tiles, the 336-pixel
pinpoints) are such a config.
"""

from __future__ import annotations

import numpy as np
import pytest
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)

import smg_fast.hf as hf
from smg_fast import load_processor
from smg_fast.errors import UnsupportedCallError
from smg_fast.testing.model_folders_llava import make_llava_tiles_folder


def _same(got, want) -> None:
    for key in ("pixel_values", "image_sizes"):
        assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key


def test_an_image_on_a_partial_tile_canvas_is_refused(tmp_path, real_images):
    make_llava_tiles_folder(tmp_path, "llava_next", image_grid_pinpoints=[[336, 500], [672, 672]])
    proc = load_processor(tmp_path, backend="pil")
    rocket = real_images.open("rocket")
    wide, square = rocket.resize((100, 60)), rocket.resize((400, 400))  # 336x500, 672x672
    with pytest.raises(UnsupportedCallError, match="best resolution 336x500 is not whole"):
        proc(wide)
    ref = LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    _same(proc(square), ref(square, return_tensors="np"))
    dropin = hf.LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    for im in (wide, [wide, square]):
        _same(dropin(im, return_tensors="np"), ref(im, return_tensors="np"))


def test_dropin_computes_transformers_class_defaults(tmp_path, real_images):
    """A folder naming only the class: the drop-in loads it (its own class, not transformers')."""
    (tmp_path / "preprocessor_config.json").write_text(
        '{"image_processor_type": "LlavaNextImageProcessorPil"}')
    ours = hf.LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    assert type(ours) is hf.LlavaNextImageProcessorPil
    coffee = real_images.open("coffee")
    wide = real_images.open("rocket").resize((300, 100))
    ours.smg_processor(coffee)  # its canvas, 672x672, is whole 224-pixel tiles: computed
    with pytest.raises(UnsupportedCallError, match="not whole 224-pixel tiles"):
        ours.smg_processor(wide)  # 336 pixels high: handed to transformers' class
    theirs = LlavaNextImageProcessorPil.from_pretrained(tmp_path)
    for im in (coffee, wide, [coffee, wide]):
        _same(ours(im, return_tensors="np"), theirs(im, return_tensors="np"))
        _same(hf.LlavaNextImageProcessorPil()(im, return_tensors="np"),
              LlavaNextImageProcessorPil()(im, return_tensors="np"))
