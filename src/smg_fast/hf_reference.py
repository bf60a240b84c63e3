"""transformers' own image processor for a config's backend, when this install can run it: the
reference ``python -m smg_fast.client --verify`` compares a server's output with.

"pil" -> ``Qwen2VLImageProcessorPil``; "torchvision" -> ``Qwen2VLImageProcessor`` /
``Kimi_K25ImageProcessor`` (which need torchvision); "upstream" (Kimi's own code) has no
transformers class. Where the matching class cannot run, the answer says why: a backend is never
compared with another backend's reference (at 1080p they differ in most float32 values).
"""

from __future__ import annotations

import importlib.util
import io
import logging
from typing import Any

import numpy as np

from .config import ProcessorConfig


def _qwen_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    return dict(size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels},
                patch_size=cfg.patch_size, temporal_patch_size=cfg.temporal_patch_size,
                merge_size=cfg.merge_size, image_mean=list(cfg.image_mean),
                image_std=list(cfg.image_std), rescale_factor=cfg.rescale_factor,
                resample=cfg.resample)


def _kimi_kwargs(cfg: ProcessorConfig) -> dict[str, Any]:
    side = cfg.patch_limit_on_one_side
    return dict(size={"max_height": side, "max_width": side}, max_patches=cfg.in_patch_limit,
                patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                image_mean=list(cfg.image_mean), image_std=list(cfg.image_std))


def _not_torch_advice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("PyTorch was not found")


def quiet_transformers_import() -> bool:
    """Imports transformers (False when it is not installed) without the "PyTorch was not
    found" advice it logs when torch is absent (a CLI's output, and not a problem here: the
    PIL reference needs no torch). A filter on its logger, which its module __init__ may run
    more than once."""
    hf_logger = logging.getLogger("transformers")
    if _not_torch_advice not in hf_logger.filters:
        hf_logger.addFilter(_not_torch_advice)
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def reference_class(cfg: ProcessorConfig) -> tuple[Any, str]:
    """(transformers class, "") for cfg's backend, or (None, why it cannot run here)."""
    if importlib.util.find_spec("transformers") is None:
        return None, "transformers is not installed here"
    kimi = cfg.family == "kimi_k25"
    if cfg.backend == "upstream":
        return None, ("the upstream backend is Kimi-K2.5's own code, which transformers does "
                      "not ship (tests/parity/test_kimi_parity.py proves it)")
    if cfg.backend == "torchvision":
        if importlib.util.find_spec("torchvision") is None:
            return None, ("the backend is torchvision and torchvision is not installed "
                          "here, so transformers' torchvision processor cannot run (not "
                          "compared with the PIL backend: they differ)")
        if kimi:
            from transformers.models.kimi_k25.image_processing_kimi_k25 import (
                Kimi_K25ImageProcessor,
            )

            return Kimi_K25ImageProcessor, ""
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

        return Qwen2VLImageProcessor, ""
    if kimi:
        return None, f"transformers has no {cfg.backend!r} processor for kimi_k25"
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return Qwen2VLImageProcessorPil, ""


def reference_processor(cfg: ProcessorConfig) -> tuple[Any, str]:
    """(transformers processor configured like cfg, "") for cfg's backend, or (None, why it
    cannot run here). Call it as transformers' processors are called; `return_tensors` must be
    "np" for the PIL class and "pt" for the torchvision ones (reference_return_tensors)."""
    cls, why = reference_class(cfg)
    if cls is None:
        return None, why
    kwargs = _kimi_kwargs(cfg) if cfg.family == "kimi_k25" else _qwen_kwargs(cfg)
    return cls(**kwargs), ""


def reference_return_tensors(processor: Any) -> str:
    return "np" if type(processor).__name__.endswith("Pil") else "pt"


def reference_pixel_values(cfg: ProcessorConfig,
                           image: str | bytes | np.ndarray) -> tuple[Any, str]:
    """(float32 pixel_values from transformers, "") for an image path, encoded bytes or an RGB
    uint8 (H, W, 3) array, or (None, why not). Paths and bytes are loaded as transformers'
    load_image does."""
    quiet_transformers_import()
    ref, why = reference_processor(cfg)
    if ref is None:
        return None, why
    from PIL import Image
    from transformers.image_utils import load_image

    img = image if isinstance(image, np.ndarray) else \
        load_image(Image.open(io.BytesIO(image)) if isinstance(image, bytes) else image)
    out = ref(img, return_tensors=reference_return_tensors(ref))
    return np.asarray(out["pixel_values"]), ""
