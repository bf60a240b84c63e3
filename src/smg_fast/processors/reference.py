"""transformers' own image processor for a config's family and backend: the one reference.

It is what ``python -m smg_fast --check``, ``python -m smg_fast.client --verify`` and the
drop-ins' fallback compute with, when this install can run it. Each family names its classes per
backend (``Family.reference``): Qwen's "pil" -> ``Qwen2VLImageProcessorPil``, "torchvision" ->
``Qwen2VLImageProcessor``; Kimi's "torchvision" -> ``Kimi_K25ImageProcessor`` (the torchvision
classes need torchvision), while Kimi's "upstream" (its own code) has no transformers class.
Where the matching class cannot run, the answer says why: a backend is never compared with
another backend's reference (at 1080p they differ in most float32 values)."""

from __future__ import annotations

import importlib
import importlib.util
import io
import logging
from typing import Any

import numpy as np

from .config import ProcessorConfig
from .registry import get_family


def _not_torch_advice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("PyTorch was not found")


def quiet_transformers_import() -> bool:
    """Imports transformers without its "PyTorch was not found" advice; False when absent.

    The advice is logged when torch is absent: noise on a CLI's output, and not a problem here
    (the PIL reference needs no torch). A filter on its logger, which its module __init__ may run
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
    """(transformers class, "") for cfg's family and backend, or (None, why it cannot run).

    The class is the one the family's ``Family.reference`` names for the backend."""
    if importlib.util.find_spec("transformers") is None:
        return None, "transformers is not installed here"
    ref = get_family(cfg.family).reference
    path = ref.classes.get(cfg.backend) if ref is not None else None
    if ref is None or path is None:
        why = ref.missing.get(cfg.backend) if ref is not None else None
        return None, why or f"transformers has no {cfg.backend!r} processor for {cfg.family}"
    if cfg.backend == "torchvision" and importlib.util.find_spec("torchvision") is None:
        return None, ("the backend is torchvision and torchvision is not installed "
                      "here, so transformers' torchvision processor cannot run (not "
                      "compared with the PIL backend: they differ)")
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name), ""


def reference_processor(cfg: ProcessorConfig) -> tuple[Any, str]:
    """(transformers processor configured like cfg, "") for cfg's backend, or (None, why not).

    Call it as transformers' processors are called; `return_tensors` must be "np" for the PIL
    class and "pt" for the torchvision ones (reference_return_tensors)."""
    cls, why = reference_class(cfg)
    if cls is None:
        return None, why
    ref = get_family(cfg.family).reference
    assert ref is not None  # reference_class found a class
    return cls(**ref.kwargs(cfg)), ""


def reference_return_tensors(processor: Any) -> str:
    """The return_tensors transformers' processor takes: "np" for a PIL class, else "pt"."""
    return "np" if type(processor).__name__.endswith("Pil") else "pt"


def reference_pixel_values(cfg: ProcessorConfig,
                           image: str | bytes | np.ndarray) -> tuple[Any, str]:
    """(float32 pixel_values from transformers, "") for one image, or (None, why not).

    A class returning bfloat16 (Llama 4's) gives its values widened to float32, exactly.

    The image is a path, encoded bytes or an RGB uint8 (H, W, 3) array; paths and bytes are
    loaded as transformers' load_image does."""
    quiet_transformers_import()
    ref, why = reference_processor(cfg)
    if ref is None:
        return None, why
    from PIL import Image
    from transformers.image_utils import load_image

    img = image if isinstance(image, np.ndarray) else \
        load_image(Image.open(io.BytesIO(image)) if isinstance(image, bytes) else image)
    out = ref(img, return_tensors=reference_return_tensors(ref))
    # Phi-4-multimodal's image_pixel_values: [images, rows, ...], one image here
    pv = out["pixel_values"] if "pixel_values" in out else out["image_pixel_values"][0]
    if str(getattr(pv, "dtype", "")) == "torch.bfloat16":  # Llama 4's: widened exactly
        pv = pv.float()
    return np.asarray(pv), ""
