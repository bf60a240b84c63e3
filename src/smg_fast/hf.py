"""Drop-in replacements for transformers' image processors, computed by smg-fast.

    from smg_fast.hf import Qwen2VLImageProcessor
    image_processor = Qwen2VLImageProcessor.from_pretrained("/models/Qwen2.5-VL-7B-Instruct")
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer)

Each class reproduces the transformers class of the same name bit for bit:
``Qwen2VLImageProcessor`` and ``Kimi_K25ImageProcessor`` the torchvision backend (what
``AutoImageProcessor`` returns when torchvision is installed: vLLM, SGLang), and
``Qwen2VLImageProcessorPil`` the PIL backend; ``backend=`` picks another. Calls take transformers'
inputs and options and return a ``transformers.BatchFeature`` with transformers' keys
(``pixel_values``, ``image_grid_thw``). This module needs transformers (not torch or torchvision,
except for ``return_tensors="pt"``).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_base import ImageProcessingMixin
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
    Qwen2VLImageProcessorKwargs,
)
from transformers.processing_utils import ImagesKwargs

from .config import ProcessorConfig
from .processors import Processor, load_processor
from .processors.qwen import smart_resize


class _SmgImageProcessor(ImageProcessingMixin):
    """An ImageProcessingMixin (so transformers' processors accept it) backed by a Processor."""

    family: ClassVar[str]
    default_backend: ClassVar[str] = "torchvision"
    model_input_names: ClassVar[list[str]] = ["pixel_values", "image_grid_thw"]

    def __init__(self, processor: Processor | None = None, *, backend: str | None = None,
                 **overrides: Any) -> None:
        """A processor for the family's built-in config (or ``processor``), with overrides
        (``min_pixels=...``, ``image_mean=...``; the config's field names)."""
        if processor is None:
            processor = load_processor(self.family, backend=backend or self.default_backend,
                                       **overrides)
        elif backend is not None or overrides:
            raise TypeError("give a processor or a backend / overrides, not both")
        self._proc = processor
        super().__init__(**self._attributes(processor.config))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str],
                        backend: str | None = None, **overrides: Any) -> Any:
        """The processor for a local model folder's preprocessor_config.json (no hub
        downloads); ``overrides`` win over the folder's values."""
        proc = load_processor(pretrained_model_name_or_path,
                              backend=backend or cls.default_backend, **overrides)
        if proc.config.family not in cls.families():
            raise ValueError(f"{pretrained_model_name_or_path} is a {proc.config.family} model, "
                             f"not one {cls.__name__} serves ({', '.join(cls.families())})")
        return cls(proc)

    @classmethod
    def families(cls) -> tuple[str, ...]:
        return (cls.family,)

    @property
    def backend(self) -> str:
        return self._proc.config.backend

    @property
    def smg_processor(self) -> Processor:
        """The smg_fast Processor this class calls."""
        return self._proc

    @staticmethod
    def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
        return dict(patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                    image_mean=list(cfg.image_mean), image_std=list(cfg.image_std),
                    rescale_factor=cfg.rescale_factor, resample=cfg.resample, do_resize=True,
                    do_rescale=True, do_normalize=True, do_convert_rgb=True)

    def fetch_images(self, image_url_or_urls: Any) -> Any:
        """http(s) URLs are fetched as transformers does; paths, data: URLs and base64 stay
        strings (decoded by the call with load_image's semantics)."""
        if isinstance(image_url_or_urls, (list, tuple)):
            return [self.fetch_images(x) for x in image_url_or_urls]
        if isinstance(image_url_or_urls, str) and \
                image_url_or_urls.startswith(("http://", "https://")):
            return super().fetch_images(image_url_or_urls)
        return image_url_or_urls

    def __call__(self, images: Any, *args: Any, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images, *args, **kwargs)

    def preprocess(self, images: Any, return_tensors: Any = None,
                   **kwargs: Any) -> BatchFeature:
        """transformers' call: images (nested lists flattened), its options; float32 output,
        or ``dtype="bfloat16"`` / ``"float16"`` (smg-fast's own option)."""
        dtype = kwargs.pop("dtype", "float32")
        rt = getattr(return_tensors, "value", return_tensors)
        out = self._proc(self.fetch_images(images), return_tensors="pt" if rt == "pt" else "np",
                         dtype=dtype, channels_first_wins=True, **kwargs)
        data = {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}
        if rt is None:  # transformers leaves numpy arrays as they are
            return BatchFeature(data=data)
        return BatchFeature(data=data, tensor_type=None if rt == "pt" else rt)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("_proc", None)
        out["image_processor_type"] = type(self).__name__
        return out


class Qwen2VLImageProcessor(_SmgImageProcessor):
    """transformers' ``Qwen2VLImageProcessor`` (torchvision backend) for Qwen2-VL, Qwen2.5-VL
    and Qwen3-VL, computed by smg-fast."""

    family = "qwen2_vl"
    valid_kwargs = Qwen2VLImageProcessorKwargs

    @classmethod
    def families(cls) -> tuple[str, ...]:
        return ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")

    @staticmethod
    def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
        out = _SmgImageProcessor._attributes(cfg)
        out.update(temporal_patch_size=cfg.temporal_patch_size, min_pixels=cfg.min_pixels,
                   max_pixels=cfg.max_pixels,
                   size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels})
        return out

    def get_number_of_image_patches(self, height: int, width: int,
                                    images_kwargs: dict[str, Any] | None = None) -> int:
        """Patches (grid cells) for an image of this size, as transformers' method (vLLM uses
        it to count placeholders without pixels)."""
        kw = images_kwargs or {}
        cfg = self._proc.config
        size = kw.get("size") or {}
        lo = kw.get("min_pixels", size.get("shortest_edge", cfg.min_pixels))
        hi = kw.get("max_pixels", size.get("longest_edge", cfg.max_pixels))
        patch = kw.get("patch_size", cfg.patch_size)
        factor = patch * kw.get("merge_size", cfg.merge_size)
        h, w = smart_resize(height, width, factor, lo, hi)
        return (h // patch) * (w // patch)


class Qwen2VLImageProcessorPil(Qwen2VLImageProcessor):
    """transformers' ``Qwen2VLImageProcessorPil`` (PIL backend), computed by smg-fast."""

    default_backend = "pil"


class _KimiKwargs(ImagesKwargs, total=False):
    """Kimi-K2.5's call options (transformers' module for them imports torchvision)."""

    max_patches: int
    patch_size: int
    merge_size: int


class Kimi_K25ImageProcessor(_SmgImageProcessor):  # noqa: N801  (transformers' name)
    """transformers' ``Kimi_K25ImageProcessor`` (torchvision backend), computed by smg-fast;
    ``backend="upstream"`` gives Kimi-K2.5's own code's numbers instead."""

    family = "kimi_k25"
    valid_kwargs = _KimiKwargs

    @staticmethod
    def _attributes(cfg: ProcessorConfig) -> dict[str, Any]:
        out = _SmgImageProcessor._attributes(cfg)
        side = cfg.patch_limit_on_one_side
        out.update(max_patches=cfg.in_patch_limit, size={"max_height": side, "max_width": side})
        return out


__all__ = ["Kimi_K25ImageProcessor", "Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil"]
