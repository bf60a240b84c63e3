"""BILINEAR resizes against Pillow's and torch's own, value for value.

Pillow: Image.resize(size, BILINEAR) with reducing_gap None, as transformers' PIL classes call it.
torch: interpolate(uint8, bilinear, antialias=True, align_corners=False), what torchvision's
resize runs for a uint8 tensor on a CPU whose torch capability is AVX2 or AVX512 (and on
aarch64). Up and down, odd sizes, one axis only, extreme aspects, 1..4 channels, real photos.
test_isa_paths reruns this file under every SMG_FAST_ISA cap."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from smg_fast import _native

BILINEAR = _native.Filter.BILINEAR
ORDER = _native.PassOrder.PILLOW13  # the installed Pillow's rule (13); ignored by torch's
TORCH = _native.Resampler.TORCH
PILLOW = _native.Resampler.PILLOW

# (in w, in h, out w, out h): shrink both, by odd factors, one side only, upscale (support 1:
# two taps), mixed, extreme aspects both ways, a tall shrink Pillow 13 runs vertically first,
# Gemma 3's 896 and Gemma 3n's 768 from photo-like sizes, 1-pixel sides, the same size.
SIZES = [(37, 53, 56, 28), (640, 427, 644, 420), (300, 200, 97, 200), (300, 200, 300, 61),
         (45, 31, 301, 283), (1, 200, 28, 28), (4000, 25, 3000, 56), (25, 4000, 56, 3000),
         (250, 600, 250, 56), (1920, 1080, 896, 896), (1080, 1920, 768, 768), (13, 7, 896, 896),
         (999, 1001, 3, 5), (7, 5, 1, 1), (1, 1, 9, 4), (64, 64, 64, 64), (2000, 3, 896, 896)]
IDS = [f"{s[0]}x{s[1]}-{s[2]}x{s[3]}" for s in SIZES]


def _image(seed: int, w: int, h: int, channels: int) -> np.ndarray:
    """Noise over a ramp, so that both the rounding and the clamping are reached."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (h, w, channels), np.uint8)
    ramp = np.broadcast_to(np.linspace(0, 255, w)[None, :, None], (h, w, channels))
    return np.where(noise > 180, noise, ramp).astype(np.uint8)


def torch_bilinear(img: np.ndarray, out_w: int, out_h: int) -> np.ndarray:
    t = torch.from_numpy(np.array(img)).permute(2, 0, 1)[None]
    out = torch.nn.functional.interpolate(t, size=(out_h, out_w), mode="bilinear",
                                          antialias=True, align_corners=False)
    return out[0].permute(1, 2, 0).contiguous().numpy()


def pillow_bilinear(img: np.ndarray, out_w: int, out_h: int) -> np.ndarray:
    """4 channels as RGBX: the native resize filters each channel alone (no premultiplication)."""
    mode = {1: "L", 3: "RGB", 4: "RGBX"}[img.shape[2]]
    im = Image.frombytes(mode, (img.shape[1], img.shape[0]), np.ascontiguousarray(img).tobytes())
    out = np.asarray(im.resize((out_w, out_h), Image.Resampling.BILINEAR, reducing_gap=None))
    return out.reshape(out_h, out_w, img.shape[2])


# (resampler, its reference, channels): Pillow has no plain 2-channel mode (LA premultiplies)
CASES = [(TORCH, torch_bilinear, c) for c in (1, 2, 3, 4)] + \
        [(PILLOW, pillow_bilinear, c) for c in (1, 3, 4)]


@pytest.mark.parametrize("resampler,ref,channels", CASES,
                         ids=[f"{r.name.lower()}-{c}" for r, _, c in CASES])
@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_bilinear_equals_its_reference(size, resampler, ref, channels):
    w, h, ow, oh = size
    img = _image(w * h + channels, w, h, channels)
    assert np.array_equal(_native.resize(img, ow, oh, BILINEAR, ORDER, resampler),
                          ref(img, ow, oh))


def test_the_two_bilinears_differ():
    """torch's weights are its own: the two resamplers differ when shrinking (1080p -> 896)."""
    img = _image(1, 1920, 1080, 3)
    assert not np.array_equal(_native.resize(img, 896, 896, BILINEAR, ORDER, TORCH),
                              _native.resize(img, 896, 896, BILINEAR, ORDER, PILLOW))


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea"])
def test_real_photos_equal_both(real_images, name):
    img = np.asarray(real_images.rgb(name))
    for ow, oh in ((896, 896), (768, 768), (224, 224), (501, 97)):
        assert np.array_equal(_native.resize(img, ow, oh, BILINEAR, ORDER, TORCH),
                              torch_bilinear(img, ow, oh)), (name, ow, oh)
        assert np.array_equal(_native.resize(img, ow, oh, BILINEAR, ORDER, PILLOW),
                              pillow_bilinear(img, ow, oh)), (name, ow, oh)


def _whole_image_pipeline(resampler, side):
    return _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                            mean=[0.5] * 3, std=[0.5] * 3, dtype=_native.DType.FLOAT32,
                            filter=BILINEAR, pass_order=ORDER, patch=side, merge=1, temporal=1,
                            resampler=resampler)


@pytest.mark.parametrize("resampler", [PILLOW, TORCH], ids=["pillow", "torch"])
def test_whole_image_layout_is_the_channel_first_image(resampler):
    """merge 1, temporal 1 and one patch as large as the image: (3, side, side), normalized."""
    side = 96
    pipe = _whole_image_pipeline(resampler, side)
    img = _image(5, 301, 173, 3)
    out = np.empty(pipe.output_elems(side, side, 1, 1), np.float32)
    pipe.run(img, side, side, 1, 1, out)
    resized = _native.resize(img, side, side, BILINEAR, ORDER, resampler)
    table = np.asarray(pipe.lut, np.float32).reshape(3, 256)
    want = np.stack([table[c][resized[..., c]] for c in range(3)])
    assert np.array_equal(out.reshape(3, side, side), want)


def test_whole_image_patch_limits():
    _whole_image_pipeline(PILLOW, 4096)
    with pytest.raises(ValueError, match="patch"):
        _whole_image_pipeline(PILLOW, 4097)
    with pytest.raises(ValueError, match="patch"):
        _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                         mean=[0.5] * 3, std=[0.5] * 3, dtype=_native.DType.FLOAT32,
                         filter=BILINEAR, pass_order=ORDER, patch=65, merge=2, temporal=1)
