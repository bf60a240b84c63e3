"""The torchvision backend: what transformers' torchvision image processors do differently.

Different, that is, from the PIL backend and from Kimi's upstream code (for
``Qwen2VLImageProcessor``, ``Kimi_K25ImageProcessor``), computed without torch or torchvision:

- resize: torch's uint8 antialiased bicubic or bilinear (``_native.Resampler.TORCH``), horizontal
  pass first;
- rescale + normalize fused: ``(f32(u) - M) / S`` with mean and std scaled by 1/rescale_factor in
  float32 (``_native.LutRecipe.TORCH_FUSED_NORMALIZE``); rescale alone (do_normalize=False) is a
  float32 multiply, ``f32(u) * f32(rescale_factor)`` (``_native.LutRecipe.TORCH_RESCALE``);
- PIL inputs convert as in the PIL backend (alpha composited onto white), for Kimi too;
- numpy (H, W, 4) inputs are blended onto white in float32 by torchvision's ``to_dtype`` rules,
  not the PIL backend's float64 rounding: ``_native.PixelFormat.RGBA_OVER_WHITE_TORCH``, converted
  by the native core while it reads the caller's array (``open_image(..., torchvision=True)``).

Sizes (smart_resize, navit), patch order and the temporal copy are the same as the other
backends'."""

from __future__ import annotations

from .. import _native

NAME = "torchvision"
LUT_TORCH = _native.LutRecipe.TORCH_FUSED_NORMALIZE
LUT_TORCH_RESCALE = _native.LutRecipe.TORCH_RESCALE
RESAMPLER = _native.Resampler.TORCH

__all__ = ["LUT_TORCH", "LUT_TORCH_RESCALE", "NAME", "RESAMPLER"]
