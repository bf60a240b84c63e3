"""Wide downscales (2.5x to 20x across); past ~4x the AVX-512 VBMI rows read channel planes.

Against Pillow (its split weights) and torch (int16 weights), for RGB, RGBX kept and RGBX read
as RGB by the pipeline, with row widths that leave a partial 64-pixel step at the end and output
widths that leave a partial 16-pixel group. test_isa_paths reruns this file under every
SMG_FAST_ISA cap with the tables' fixed order, so that the VBMI and VNNI kernels run it where the
CPU has them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from test_isa_paths import ARCH, CAPS_BY_ARCH, allowed, host_flags

from smg_fast import _native

F = _native.PixelFormat
ORDER = _native.PassOrder.PILLOW13
PIL_FILTERS = {"bicubic": (_native.Filter.BICUBIC, Image.Resampling.BICUBIC),
               "bilinear": (_native.Filter.BILINEAR, Image.Resampling.BILINEAR),
               "lanczos": (_native.Filter.LANCZOS, Image.Resampling.LANCZOS),
               "box": (_native.Filter.BOX, Image.Resampling.BOX),
               "hamming": (_native.Filter.HAMMING, Image.Resampling.HAMMING)}
TORCH_MODES = {"bicubic": _native.Filter.BICUBIC, "bilinear": _native.Filter.BILINEAR,
               "lanczos": _native.Filter.LANCZOS}
# (in w, out w): 2.5x, 3x, 3.8x (the 4K video's), 5x, 7.5x, 9x (planes read in halves), 20x (past
# the halves: the next kernel's); in widths off 64 and the 1-pixel rest of a row.
WIDTHS = [(1931, 772), (1000, 333), (3851, 1008), (645, 129), (1501, 200), (2000, 222),
          (2049, 102), (129, 37)]


def _image(w: int, h: int, channels: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (h, w, channels), np.uint8)
    ramp = np.broadcast_to(np.linspace(0, 255, w)[None, :, None], noise.shape)
    return np.where(noise > 180, noise, ramp).astype(np.uint8)  # clipping and rounding reached


@pytest.mark.parametrize("name", sorted(PIL_FILTERS))
@pytest.mark.parametrize("size", WIDTHS, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("channels", [3, 4])
def test_wide_downscales_equal_pillow(name, size, channels):
    w, ow = size
    ours_filter, pil_filter = PIL_FILTERS[name]
    img = _image(w, 5, channels, w + channels)
    mode = "RGB" if channels == 3 else "RGBX"
    ref = np.asarray(Image.frombytes(mode, (w, 5), img.tobytes()).resize((ow, 5), pil_filter))
    ours = _native.resize(img, ow, 5, ours_filter, ORDER, _native.Resampler.PILLOW)
    assert np.array_equal(ours, ref.reshape(ours.shape))


@pytest.mark.parametrize("mode", sorted(TORCH_MODES))
@pytest.mark.parametrize("size", WIDTHS, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("channels", [3, 4])
def test_wide_downscales_equal_torch(mode, size, channels):
    w, ow = size
    img = _image(w, 6, channels, 7 * w + channels)
    t = torch.from_numpy(img.copy()).permute(2, 0, 1)[None]
    ref = torch.nn.functional.interpolate(t, size=(3, ow), mode=mode, antialias=True,
                                          align_corners=False)[0].permute(1, 2, 0).numpy()
    ours = _native.resize(img, ow, 3, TORCH_MODES[mode], ORDER, _native.Resampler.TORCH)
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize("size", [(1931, 772), (3851, 1008), (1501, 200)],
                         ids=lambda s: f"{s[0]}-{s[1]}")
def test_rgbx_read_as_rgb_equals_the_rgb_resize(size):
    """The pipeline's RGBX rows (the pad byte dropped by the horizontal pass) against RGB ones."""
    w, ow = size
    rgbx = _image(w, 8, 4, w)
    rgb = np.ascontiguousarray(rgbx[:, :, :3])
    pipe = _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                            mean=[0.48, 0.46, 0.41], std=[0.27, 0.26, 0.28],
                            dtype=_native.DType.FLOAT32, filter=_native.Filter.BICUBIC,
                            pass_order=ORDER, patch=14, merge=2, temporal=1)
    oh = 28
    gw = -(-ow // 28) * 2
    outs = []
    for src, fmt in ((rgbx, F.RGBX), (rgb, None)):
        out = np.empty(pipe.output_elems(ow, oh, 2, gw), np.float32)
        pipe.run(src, ow, oh, 2, gw, out, fmt=fmt)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])


def test_wide_downscales_run_the_vbmi_rows_where_the_cpu_has_them():
    """Without timing, a 3.8x RGB downscale's rows go to the best horizontal kernel of this CPU.

    AVX-512 VNNI / VBMI where /proc/cpuinfo lists them (their rows read channel planes there),
    else AVX2; the tables' fixed order picks."""
    code = ("import json, numpy as np, smg_fast; from smg_fast import _native as n; "
            "img = np.zeros((40, 3851, 3), np.uint8); "
            "n.resize(img, 1008, 40, n.Filter.BICUBIC, n.PassOrder.PILLOW13, n.Resampler.TORCH); "
            "print(json.dumps(smg_fast.kernel_info()['ran']))")
    env = {k: v for k, v in os.environ.items() if k != "SMG_FAST_ISA"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**env, "SMG_FAST_TUNE": "0"})
    best = allowed(CAPS_BY_ARCH.get(ARCH, ["baseline"])[-1], host_flags())
    assert json.loads(run.stdout)["resample.horizontal"] == [best["resample.horizontal"][-1]]
