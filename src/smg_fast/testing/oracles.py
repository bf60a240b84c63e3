"""The references the tests and the benchmarks compare smg-fast with, as the hub configs.

They are configured like the published hub configs: transformers' Qwen image processors, and for
Kimi-K2.5 (which transformers ships only as a torchvision class) the upstream MoonViT
preprocessing written out in NumPy + Pillow. The configs and the arithmetic are written out here
independently of smg_fast's own tables and code, so a wrong built-in value cannot agree with
itself."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PIL import Image

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Qwen2-VL-7B / Qwen2.5-VL-7B / Qwen3-VL-8B preprocessor configs.
HUB_QWEN = {
    "qwen2_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14, mean=CLIP_MEAN,
                     std=CLIP_STD),
    "qwen2_5_vl": dict(min_pixels=3136, max_pixels=12845056, patch_size=14, mean=CLIP_MEAN,
                       std=CLIP_STD),
    "qwen3_vl": dict(min_pixels=65536, max_pixels=16777216, patch_size=16, mean=[0.5] * 3,
                     std=[0.5] * 3),
}

# GLM-4.1V-9B-Thinking's preprocessor config (size 12544..9633792: the defaults of transformers'
# glm4v smart_resize, 112*112 and 14*14*2*2*2*6144), which GLM-4.5V and GLM-4.6V keep.
HUB_GLM = {name: dict(min_pixels=12544, max_pixels=9633792, patch_size=14, mean=CLIP_MEAN,
                      std=CLIP_STD) for name in ("glm4v", "glm46v")}

# Kimi-K2.5's media_proc_cfg.
HUB_KIMI = dict(in_patch_limit=16384, patch_limit_on_one_side=512, patch_size=14,
                merge_kernel_size=2, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5))


def qwen_kwargs(family: str, **overrides: Any) -> dict[str, Any]:
    """transformers' Qwen2-VL constructor arguments for family's hub config.

    min_pixels / max_pixels / patch_size are overridable (None keeps the hub's value).
    """
    cfg = {**HUB_QWEN[family], **{k: v for k, v in overrides.items() if v is not None}}
    return dict(size={"shortest_edge": cfg["min_pixels"], "longest_edge": cfg["max_pixels"]},
                patch_size=cfg["patch_size"], temporal_patch_size=2, merge_size=2,
                image_mean=list(cfg["mean"]), image_std=list(cfg["std"]))


def hf_qwen(cls: Any, family: str, **overrides: Any) -> Any:
    """cls built from family's hub config, and checked through its attributes.

    cls is Qwen2VLImageProcessorPil or the torchvision Qwen2VLImageProcessor; min_pixels /
    max_pixels / patch_size are overridable. The check matters: a silently ignored keyword would
    make every comparison use the wrong oracle."""
    cfg = {**HUB_QWEN[family], **{k: v for k, v in overrides.items() if v is not None}}
    proc = cls(**qwen_kwargs(family, **overrides))
    assert proc.size["shortest_edge"] == cfg["min_pixels"]
    assert proc.size["longest_edge"] == cfg["max_pixels"]
    assert proc.patch_size == cfg["patch_size"]
    assert proc.merge_size == 2 and proc.temporal_patch_size == 2
    assert list(proc.image_mean) == list(cfg["mean"])
    assert list(proc.image_std) == list(cfg["std"])
    return proc


def glm_kwargs(family: str) -> dict[str, Any]:
    """transformers' Glm4vImageProcessor (or Glm46V) arguments for family's hub config."""
    cfg = HUB_GLM[family]
    return dict(size={"shortest_edge": cfg["min_pixels"], "longest_edge": cfg["max_pixels"]},
                patch_size=cfg["patch_size"], temporal_patch_size=2, merge_size=2,
                image_mean=list(cfg["mean"]), image_std=list(cfg["std"]))


def hf_glm(cls: Any, family: str) -> Any:
    """cls (transformers' GLM class for family, PIL or torchvision) from the hub config, checked.

    Checked through its attributes, as hf_qwen is."""
    cfg = HUB_GLM[family]
    proc = cls(**glm_kwargs(family))
    got = (dict(proc.size), proc.patch_size, proc.merge_size, proc.temporal_patch_size,
           list(proc.image_mean), list(proc.image_std))
    want = ({"shortest_edge": cfg["min_pixels"], "longest_edge": cfg["max_pixels"]},
            cfg["patch_size"], 2, 2, list(cfg["mean"]), list(cfg["std"]))
    assert got == want, (got, want)
    return proc


def kimi_kwargs(cfg: dict[str, Any] = HUB_KIMI) -> dict[str, Any]:
    """transformers' Kimi_K25ImageProcessor constructor arguments for a media_proc_cfg."""
    side = cfg["patch_limit_on_one_side"]
    return dict(size={"max_height": side, "max_width": side}, max_patches=cfg["in_patch_limit"],
                patch_size=cfg["patch_size"], merge_size=cfg["merge_kernel_size"],
                image_mean=list(cfg["image_mean"]), image_std=list(cfg["image_std"]))


def kimi_sizes(w: int, h: int, cfg: dict[str, Any] = HUB_KIMI) -> tuple[int, int, int, int]:
    """The upstream navit resize of a w x h image: (new_w, new_h, padded_w, padded_h).

    Never upscales, truncates, caps each side at the per-side limit; pads to patch * merge."""
    p = cfg["patch_size"]
    side = cfg["patch_limit_on_one_side"]
    pw = float(max(1, w // p))
    ph = float(max(1, h // p))
    scale = min(1.0, math.sqrt(cfg["in_patch_limit"] / (pw * ph)), side * p / w, side * p / h)
    new_w = min(max(1, int(w * scale)), side * p)
    new_h = min(max(1, int(h * scale)), side * p)
    f = cfg["merge_kernel_size"] * p
    return new_w, new_h, new_w + (f - new_w % f) % f, new_h + (f - new_h % f) % f


def kimi_normalize(pixels: np.ndarray, mean: Any, std: Any) -> np.ndarray:
    """The upstream normalize of uint8 pixels (..., 3), each step in float64 stored as float32.

    x / 255.0 in float64 stored as float32, then in place minus the float64 mean and times the
    float64 1.0 / std (np.array of the config's Python floats)."""
    x = (pixels / 255.0).astype(np.float32)
    mean64 = np.array(list(mean))
    inv_std64 = 1.0 / np.array(list(std))
    assert mean64.dtype == inv_std64.dtype == np.float64
    x -= mean64
    x *= inv_std64
    assert x.dtype == np.float32
    return x


def kimi_upstream(image: Image.Image, cfg: dict[str, Any] = HUB_KIMI
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Kimi-K2.5's upstream preprocessing of one image: (pixel_values, grid).

    convert("RGB") (alpha dropped, no EXIF), the navit resize with Pillow's BICUBIC, zero padding
    right and bottom, normalize, patches [N, 3, P, P] in row-major order. Returns (pixel_values
    float32, grid [[1, H/P, W/P]] int64)."""
    p = cfg["patch_size"]
    rgb = image.convert("RGB")
    new_w, new_h, pad_w, pad_h = kimi_sizes(rgb.width, rgb.height, cfg)
    resized = np.asarray(rgb.resize((new_w, new_h), Image.Resampling.BICUBIC))
    canvas = np.zeros((pad_h, pad_w, 3), dtype=np.uint8)
    canvas[:new_h, :new_w] = resized
    x = kimi_normalize(canvas, cfg["image_mean"], cfg["image_std"])
    gh, gw = pad_h // p, pad_w // p
    chw = np.transpose(x, (2, 0, 1))
    patches = chw.reshape(3, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, 3, p, p)
    return np.ascontiguousarray(patches), np.array([[1, gh, gw]], dtype=np.int64)


# moonshotai/Kimi-VL-A3B-Instruct's preprocessor config (KimiVLImageProcessor, pad_input true)
HUB_KIMI_VL = dict(in_token_limit=4096, patch_size=14, merge_kernel_size=[2, 2],
                   image_mean=[0.5] * 3, image_std=[0.5] * 3)


def kimi_vl_upstream(image: Image.Image, cfg: dict[str, Any] = HUB_KIMI_VL) -> np.ndarray:
    """Kimi-VL's remote-code preprocessing of one image in NumPy + Pillow: pixel_values.

    Over in_token_limit patches (floor-divided sides) a BICUBIC resize by sqrt(limit / patches)
    in the image's own mode; zero padding right and bottom to patch * merge; convert("RGB");
    float32 u / 255, then (x - mean) / std in float32 (torchvision's to_tensor and normalize);
    patches [N, 3, P, P] in row-major order."""
    from PIL import ImageOps

    p, limit = cfg["patch_size"], cfg["in_token_limit"]
    cells = (image.width // p) * (image.height // p)
    if cells > limit:
        f = math.sqrt(limit / cells)
        image = image.resize((int(image.width * f), int(image.height * f)),
                             Image.Resampling.BICUBIC)
    step_h, step_w = (k * p for k in cfg["merge_kernel_size"])
    image = ImageOps.expand(image, (0, 0, -image.width % step_w, -image.height % step_h), fill=0)
    x = np.asarray(image.convert("RGB"), dtype=np.float32) / np.float32(255)
    x = (x - np.array(cfg["image_mean"], np.float32)) / np.array(cfg["image_std"], np.float32)
    gh, gw = x.shape[0] // p, x.shape[1] // p
    cells_first = x.transpose(2, 0, 1).reshape(3, gh, p, gw, p).transpose(1, 3, 0, 2, 4)
    return np.ascontiguousarray(cells_first.reshape(gh * gw, 3, p, p))


def kimi_upstream_batch(images: list[Image.Image], cfg: dict[str, Any] = HUB_KIMI
                        ) -> tuple[np.ndarray, np.ndarray]:
    """kimi_upstream of each image, concatenated as one call's output."""
    parts = [kimi_upstream(im, cfg) for im in images]
    return np.concatenate([a for a, _ in parts]), np.concatenate([g for _, g in parts])


# The Qwen-sized OCR families: PaddlePaddle/PaddleOCR-VL's preprocessor_config.json; ERNIE-4.5-VL
# and HunyuanOCR as transformers' classes default to (size 56*56 .. 28*28*6177 pixels; 512*512 ..
# 2048*2048 and patch 16), with HunyuanOCR's hub resample 1 (LANCZOS), which its classes ignore.
HUB_QWEN_LIKE: dict[str, dict[str, Any]] = {
    "paddleocr_vl": dict(min_pixels=147384, max_pixels=2822400, patch_size=14, mean=[0.5] * 3,
                         std=[0.5] * 3, resample=3),
    "ernie4_5_vl_moe": dict(min_pixels=3136, max_pixels=4842768, patch_size=14, mean=CLIP_MEAN,
                            std=CLIP_STD, resample=3),
    "hunyuan_vl": dict(min_pixels=262144, max_pixels=4194304, patch_size=16, mean=CLIP_MEAN,
                       std=CLIP_STD, resample=1),
}


def qwen_like_kwargs(family: str, **overrides: Any) -> dict[str, Any]:
    """transformers' constructor arguments for a HUB_QWEN_LIKE family's hub config.

    min_pixels / max_pixels are overridable (None keeps the hub's value)."""
    cfg = {**HUB_QWEN_LIKE[family], **{k: v for k, v in overrides.items() if v is not None}}
    return dict(size={"shortest_edge": cfg["min_pixels"], "longest_edge": cfg["max_pixels"]},
                patch_size=cfg["patch_size"], temporal_patch_size=1, merge_size=2,
                image_mean=list(cfg["mean"]), image_std=list(cfg["std"]),
                resample=cfg["resample"])


def hf_qwen_like(cls: Any, family: str, **overrides: Any) -> Any:
    """cls (a PIL or torchvision class of a HUB_QWEN_LIKE family) from its hub config, checked."""
    cfg = {**HUB_QWEN_LIKE[family], **{k: v for k, v in overrides.items() if v is not None}}
    proc = cls(**qwen_like_kwargs(family, **overrides))
    assert proc.size["shortest_edge"] == cfg["min_pixels"]
    assert proc.size["longest_edge"] == cfg["max_pixels"]
    assert proc.patch_size == cfg["patch_size"] and proc.merge_size == 2
    assert proc.temporal_patch_size == 1 and proc.resample == cfg["resample"]
    assert list(proc.image_mean) == list(cfg["mean"])
    assert list(proc.image_std) == list(cfg["std"])
    return proc


# transformers' classes of the HUB_QWEN_LIKE families: (module under transformers.models, name of
# the torchvision class; its PIL class adds "Pil").
QWEN_LIKE_CLASSES = {
    "paddleocr_vl": ("paddleocr_vl", "PaddleOCRVLImageProcessor"),
    "ernie4_5_vl_moe": ("ernie4_5_vl_moe", "Ernie4_5_VLMoeImageProcessor"),
    "hunyuan_vl": ("hunyuan_vl", "HunYuanVLImageProcessor"),
}


def qwen_like_reference(family: str, backend: str = "pil", **overrides: Any) -> Any:
    """transformers' PIL or torchvision class of a HUB_QWEN_LIKE family, from its hub config."""
    import importlib

    model, name = QWEN_LIKE_CLASSES[family]
    module = f"transformers.models.{model}.image_processing_{'pil_' if backend == 'pil' else ''}"
    cls = getattr(importlib.import_module(module + model), name + ("Pil" if backend == "pil"
                                                                    else ""))
    return hf_qwen_like(cls, family, **overrides)


__all__ = ["CLIP_MEAN", "CLIP_STD", "HUB_GLM", "HUB_KIMI", "HUB_QWEN", "glm_kwargs", "hf_glm",
           "hf_qwen", "kimi_kwargs",
           "kimi_normalize", "kimi_sizes", "kimi_upstream", "kimi_upstream_batch",
           "qwen_kwargs"]
__all__ += ["HUB_KIMI_VL", "kimi_vl_upstream"]


def qwen_like_tokens(family: str, grid: Any) -> int:
    """The LLM tokens transformers' processor gives one image of a HUB_QWEN_LIKE family.

    HunyuanOCR: HunYuanVLProcessor's own replace_image_token (a newline token per merged row and
    two wrappers); the others: t * h * w / merge^2, as their processors count."""
    t, h, w = (int(v) for v in grid)
    if family != "hunyuan_vl":
        return t * h * w // 4
    from transformers.models.hunyuan_vl.processing_hunyuan_vl import HunYuanVLProcessor

    proc = object.__new__(HunYuanVLProcessor)  # no tokenizer: only the counting method is used
    proc.image_processor = qwen_like_reference("hunyuan_vl", "pil")
    proc.image_processor.spatial_patch_size = 1  # transformers' class attribute
    proc.cat_extra_token, proc.image_token = True, "<i>"
    return len(proc.replace_image_token({"image_grid_thw": [[t, h, w]]}, 0)) // len("<i>")


__all__ += ["HUB_QWEN_LIKE", "QWEN_LIKE_CLASSES", "hf_qwen_like", "qwen_like_kwargs",
            "qwen_like_reference", "qwen_like_tokens"]

# google/gemma-3-4b-it (and 12b / 27b) preprocessor_config.json: Gemma3ImageProcessor, size
# 896x896, resample 2 (BILINEAR), rescale 1/255, mean = std = 0.5, do_pan_and_scan off.
HUB_GEMMA3 = dict(size={"height": 896, "width": 896}, resample=2, rescale_factor=1 / 255,
                  image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def hf_gemma3(cls: Any, **overrides: Any) -> Any:
    """cls (Gemma3ImageProcessorPil or Gemma3ImageProcessor) built from the hub config, checked.

    overrides replace the hub's constructor arguments."""
    kwargs = {**HUB_GEMMA3, **overrides}
    proc = cls(**kwargs)
    assert (proc.size["height"], proc.size["width"]) == (kwargs["size"]["height"],
                                                         kwargs["size"]["width"])
    assert int(proc.resample) == kwargs["resample"]
    assert list(proc.image_mean) == list(kwargs["image_mean"])
    assert list(proc.image_std) == list(kwargs["image_std"])
    assert not proc.do_pan_and_scan
    return proc


__all__ += ["HUB_GEMMA3", "hf_gemma3"]

# transformers' Gemma4ImageProcessor class defaults, which the published google/gemma-4
# checkpoints' processor configs hold (vision_config: patch_size 16, pooling_kernel_size 3,
# default_output_length 280): BICUBIC, rescale 1/255, do_normalize false (mean 0, std 1).
HUB_GEMMA4 = dict(patch_size=16, max_soft_tokens=280, pooling_kernel_size=3, resample=3,
                  rescale_factor=1 / 255, do_normalize=False, image_mean=[0.0, 0.0, 0.0],
                  image_std=[1.0, 1.0, 1.0])
# google/gemma-3n-E4B-it (and E2B) preprocessor_config.json: SiglipImageProcessorFast, size
# 768x768, resample 2 (BILINEAR), rescale 1/255, do_normalize false, mean = std = 0.5.
HUB_GEMMA3N = dict(size={"height": 768, "width": 768}, resample=2, rescale_factor=1 / 255,
                   do_normalize=False, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def hf_gemma4(cls: Any, **overrides: Any) -> Any:
    """cls (Gemma4ImageProcessorPil or Gemma4ImageProcessor) built from the hub config, checked."""
    kwargs = {**HUB_GEMMA4, **overrides}
    proc = cls(**kwargs)
    assert (proc.patch_size, proc.max_soft_tokens, proc.pooling_kernel_size) == (
        kwargs["patch_size"], kwargs["max_soft_tokens"], kwargs["pooling_kernel_size"])
    assert int(proc.resample) == kwargs["resample"] and proc.do_normalize is False
    return proc


def hf_gemma3n(cls: Any, **overrides: Any) -> Any:
    """cls (SiglipImageProcessorPil or SiglipImageProcessor) built from Gemma 3n's hub config."""
    kwargs = {**HUB_GEMMA3N, **overrides}
    proc = cls(**kwargs)
    assert (proc.size["height"], proc.size["width"]) == (768, 768) or "size" in overrides
    assert int(proc.resample) == kwargs["resample"]
    assert proc.do_normalize is kwargs["do_normalize"]
    return proc


__all__ += ["HUB_GEMMA3N", "HUB_GEMMA4", "hf_gemma3n", "hf_gemma4"]


# OpenGVLab/InternVL3-1B-hf (and the other InternVL 2.5 / 3 / 3.5 -hf checkpoints)
# preprocessor_config.json: GotOcr2ImageProcessorFast, size 448x448, crop_to_patches true,
# min_patches 1, max_patches 12, resample 3 (BICUBIC), rescale 1/255, ImageNet mean / std.
HUB_INTERNVL = dict(size={"height": 448, "width": 448}, crop_to_patches=True, min_patches=1,
                    max_patches=12, resample=3, rescale_factor=1 / 255,
                    image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])


def hf_internvl(cls: Any, **overrides: Any) -> Any:
    """cls (GotOcr2ImageProcessorPil or GotOcr2ImageProcessor) built from the hub config, checked.

    overrides replace the hub's constructor arguments."""
    kwargs = {**HUB_INTERNVL, **overrides}
    proc = cls(**kwargs)
    for key in ("crop_to_patches", "min_patches", "max_patches", "rescale_factor"):
        assert getattr(proc, key) == kwargs[key], key
    assert dict(proc.size) == dict(kwargs["size"]) or (proc.size.height, proc.size.width) == (
        kwargs["size"]["height"], kwargs["size"]["width"])
    assert int(proc.resample) == kwargs["resample"]
    assert list(proc.image_mean) == list(kwargs["image_mean"])
    assert list(proc.image_std) == list(kwargs["image_std"])
    return proc


__all__ += ["HUB_INTERNVL", "hf_internvl"]


# mistral-community/pixtral-12b preprocessor_config.json: PixtralImageProcessor, size
# {"longest_edge": 1024}, patch_size 16x16, resample 3 (BICUBIC), rescale 1/255, OpenAI CLIP
# mean / std, do_convert_rgb true.
HUB_PIXTRAL = dict(size={"longest_edge": 1024}, patch_size={"height": 16, "width": 16},
                   resample=3, rescale_factor=1 / 255, do_convert_rgb=True,
                   image_mean=[0.48145466, 0.4578275, 0.40821073],
                   image_std=[0.26862954, 0.26130258, 0.27577711])


def hf_pixtral(cls: Any, **overrides: Any) -> Any:
    """cls (PixtralImageProcessorPil or PixtralImageProcessor) built from the hub config, checked.

    overrides replace the hub's constructor arguments."""
    kwargs = {**HUB_PIXTRAL, **overrides}
    proc = cls(**kwargs)
    assert dict(proc.size)["longest_edge"] == kwargs["size"]["longest_edge"]
    assert dict(proc.patch_size) == dict(kwargs["patch_size"])
    assert int(proc.resample) == kwargs["resample"] and proc.do_pad is not False
    assert list(proc.image_mean) == list(kwargs["image_mean"])
    assert list(proc.image_std) == list(kwargs["image_std"])
    return proc


__all__ += ["HUB_PIXTRAL", "hf_pixtral"]


# llava-hf/llava-v1.6-mistral-7b-hf preprocessor_config.json (values as transformers' docs and
# tests give them; the hub was not reachable where this was written): LlavaNextImageProcessor,
# size {"shortest_edge": 336}, crop_size 336 x 336, the five 336-pixel pinpoints, BICUBIC,
# rescale 1/255, OpenAI CLIP mean / std, do_center_crop / do_pad / do_convert_rgb true.
HUB_LLAVA_NEXT = dict(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336},
                      image_grid_pinpoints=[[336, 672], [672, 336], [672, 672], [1008, 336],
                                            [336, 1008]],
                      resample=3, rescale_factor=1 / 255, do_center_crop=True, do_pad=True,
                      image_mean=CLIP_MEAN, image_std=CLIP_STD)
# llava-hf/llava-onevision-qwen2-7b-ov-hf preprocessor_config.json (as above): size 384 x 384,
# the 36 pinpoints of 1..6 x 1..6 tiles of 384, BICUBIC, rescale 1/255, SigLIP's mean / std
# [0.5, 0.5, 0.5], do_pad / do_convert_rgb true.
HUB_LLAVA_ONEVISION = dict(size={"height": 384, "width": 384},
                           image_grid_pinpoints=[[384 * r, 384 * c] for r in range(1, 7)
                                                 for c in range(1, 7)],
                           resample=3, rescale_factor=1 / 255, do_pad=True,
                           image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
HUB_LLAVA = {"llava_next": HUB_LLAVA_NEXT, "llava_onevision": HUB_LLAVA_ONEVISION}


def hf_llava(family: str, cls: Any, **overrides: Any) -> Any:
    """cls (a LLaVA-NeXT or OneVision class) built from family's hub config, checked.

    overrides replace the hub's constructor arguments."""
    kwargs = {**HUB_LLAVA[family], **overrides}
    proc = cls(**kwargs)
    assert [list(p) for p in proc.image_grid_pinpoints] == kwargs["image_grid_pinpoints"]
    assert {k: v for k, v in dict(proc.size).items() if v is not None} == kwargs["size"]
    assert int(proc.resample) == kwargs["resample"] and proc.do_pad is not False
    assert list(proc.image_mean) == list(kwargs["image_mean"])
    assert list(proc.image_std) == list(kwargs["image_std"])
    return proc


__all__ += ["HUB_LLAVA", "HUB_LLAVA_NEXT", "HUB_LLAVA_ONEVISION", "hf_llava"]

# meta-llama/Llama-4-Scout-17B-16E-Instruct preprocessor_config.json (as transformers' class
# defaults and docs give it; no hub access here): size 336 x 336, max_patches 16,
# resize_to_max_canvas false, BILINEAR, rescale 1/255, mean / std [0.5, 0.5, 0.5].
HUB_LLAMA4 = dict(size={"height": 336, "width": 336}, max_patches=16, resize_to_max_canvas=False,
                  resample=2, rescale_factor=1 / 255, image_mean=[0.5, 0.5, 0.5],
                  image_std=[0.5, 0.5, 0.5], do_convert_rgb=True)

__all__ += ["HUB_LLAMA4"]

# microsoft/Phi-4-multimodal-instruct's preprocessor_config.json image settings as
# Phi4MultimodalImageProcessor takes them (its file sets dynamic_hd 36; the rest are the class's
# defaults, which the file leaves out): 448 crops, BICUBIC for the global image, mean / std 0.5.
HUB_PHI4 = dict(size={"height": 448, "width": 448}, patch_size=14, dynamic_hd=36, resample=3,
                rescale_factor=1 / 255, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                do_convert_rgb=True)

__all__ += ["HUB_PHI4"]
