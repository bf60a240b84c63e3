"""The references the bench/ suites and the regression gate measure smg-fast against.

Also the benchmark photo. Shared so bench/ suites and bench/gate.py measure exactly the same thing.

- Qwen2-VL / Qwen2.5-VL / Qwen3-VL: transformers' PIL/NumPy processor (``Qwen2VLImageProcessorPil``)
  configured with the family's published hub config.
- GLM-4.1V / GLM-4.6V: transformers' ``Glm4vImageProcessorPil`` / ``Glm46VImageProcessorPil``
  with GLM-4.1V's published hub config.
- PaddleOCR-VL / ERNIE-4.5-VL / HunyuanOCR: their own transformers PIL classes, configured with
  their hub configs (``smg_fast.testing.oracles.qwen_like_reference``).
- Kimi-K2.5: transformers has no PIL processor for it, so ``kimi_upstream_numpy`` below is the
  NumPy/PIL implementation of the upstream MoonViT preprocessing the tests compare with too
  (``smg_fast.testing.oracles.kimi_upstream``).
- Kimi-VL: remote code only; ``KimiVLUpstream`` runs ``smg_fast.testing.oracles.kimi_vl_upstream``,
  which tests/parity/test_kimi_vl_parity.py proves equal to that code's torch steps."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from PIL import Image

from smg_fast.testing.oracles import (
    QWEN_LIKE_CLASSES,
    kimi_upstream,
    kimi_vl_upstream,
    qwen_like_reference,
)

PHOTO = "astronaut.png"  # scikit-image's sample photo, RGB 512x512


def kimi_upstream_numpy(image: Image.Image) -> np.ndarray:
    """Kimi-K2.5 upstream NumPy reference with its hub config: pixel_values [N, 3, P, P].

    The array is float32."""
    return kimi_upstream(image)[0]


# --------------------------------------------------------------------------------------------
# References from transformers
# --------------------------------------------------------------------------------------------


def make_hf_pil_qwen(family: str):
    """transformers' PIL/NumPy Qwen2-VL processor configured like `family`'s hub config.

    PaddleOCR-VL, ERNIE-4.5-VL and HunyuanOCR: their own PIL classes, from their hub configs.
    GLM: its own PIL class (make_hf_pil_glm)."""
    if family in QWEN_LIKE_CLASSES:
        return qwen_like_reference(family, "pil")
    if family.startswith("glm"):
        return make_hf_pil_glm(family)
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from smg_fast.testing.oracles import hf_qwen

    return hf_qwen(Qwen2VLImageProcessorPil, family)


def make_hf_pil_glm(family: str):
    """transformers' Glm4vImageProcessorPil (Glm46V's for glm46v) with GLM-4.1V's hub config."""
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil
    from transformers.models.glm46v.image_processing_pil_glm46v import Glm46VImageProcessorPil

    from smg_fast.testing.oracles import hf_glm

    return hf_glm(Glm46VImageProcessorPil if family == "glm46v" else Glm4vImageProcessorPil,
                  family)


class KimiVLUpstream:
    """Kimi-VL's remote code in NumPy + Pillow (``oracles.kimi_vl_upstream``), as a processor."""

    def __call__(self, image: Image.Image, return_tensors: str = "np") -> dict[str, np.ndarray]:
        return {"pixel_values": kimi_vl_upstream(image)}


def make_hf_pil(family: str):
    """transformers' PIL/NumPy processor configured like `family`'s hub config."""
    if family == "kimi_vl":  # remote code only: the tests' NumPy reference of it
        return KimiVLUpstream()
    if family == "internvl":
        from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (
            GotOcr2ImageProcessorPil,
        )

        from smg_fast.testing.oracles import hf_internvl

        return hf_internvl(GotOcr2ImageProcessorPil)
    if family == "gemma3":
        from transformers.models.gemma3.image_processing_pil_gemma3 import (
            Gemma3ImageProcessorPil,
        )

        from smg_fast.testing.oracles import hf_gemma3

        return hf_gemma3(Gemma3ImageProcessorPil)
    if family in ("gemma4", "gemma3n"):
        return make_hf_pil_gemma(family)
    if family == "pixtral":
        from transformers.models.pixtral.image_processing_pil_pixtral import (
            PixtralImageProcessorPil,
        )

        from smg_fast.testing.oracles import hf_pixtral

        return hf_pixtral(PixtralImageProcessorPil)
    if family in ("llava_next", "llava_onevision"):
        from transformers.models.llava_next.image_processing_pil_llava_next import (
            LlavaNextImageProcessorPil,
        )
        from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
            LlavaOnevisionImageProcessorPil,
        )

        from smg_fast.testing.oracles import hf_llava

        return hf_llava(family, LlavaNextImageProcessorPil if family == "llava_next"
                        else LlavaOnevisionImageProcessorPil)
    if family == "idefics3":
        from transformers.models.idefics3.image_processing_pil_idefics3 import (
            Idefics3ImageProcessorPil,
        )

        from smg_fast.testing.model_folders_idefics3 import IDEFICS3, hub_kwargs

        return Idefics3ImageProcessorPil(**hub_kwargs(IDEFICS3))
    return make_hf_pil_qwen(family)


def make_hf_pil_gemma(family: str):
    """transformers' Gemma4ImageProcessorPil or (Gemma 3n's) SiglipImageProcessorPil, hub config."""
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    from smg_fast.testing.oracles import hf_gemma3n, hf_gemma4

    if family == "gemma4":
        return hf_gemma4(Gemma4ImageProcessorPil)
    return hf_gemma3n(SiglipImageProcessorPil)


def photo_file() -> Path:
    """scikit-image's sample photo; FileNotFoundError when scikit-image (or the file) is missing."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("scikit-image is not installed (its sample photo is the benchmark "
                                "input)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / PHOTO
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing")
    return path


def load_photos(sizes) -> dict[tuple[int, int], Image.Image]:
    """The photo resized once with LANCZOS to every (width, height) in `sizes` (RGB, loaded)."""
    with Image.open(photo_file()) as im:
        base = im.convert("RGB")
    return {size: base.resize(size, Image.Resampling.LANCZOS) for size in sizes}
