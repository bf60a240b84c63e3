"""A consumer of pixel_values, transformers' own Qwen2-VL vision tower, sees no difference.

Qwen2VisionTransformerPretrainedModel, tiny and randomly initialised from a Qwen2VLVisionConfig
(no download), runs on smg-fast's output and on transformers' processor's for the same images.
The embeddings must be identical (torch.equal) in float32 and in bfloat16: the model sees no
difference, including in the grid it is given and the patch layout it unpacks. The PIL backend
is compared with Qwen2VLImageProcessorPil (main environment); backend="torchvision" with the
real torchvision Qwen2VLImageProcessor, whose pixel_values come from the oracle venv
(tests/support/tv_oracle.py) while the tower runs here.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

from smg_fast import load_processor
from smg_fast.testing.oracles import hf_qwen

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Real photos as shipped and brought to small odd sizes (one below min_pixels, so upscaled; one
# wide, one tall), small enough that the tower takes well under a second per image.
SIZES = [("astronaut", None), ("chelsea", None), ("rocket", (200, 301)), ("coffee", (37, 53)),
         ("hubble", (311, 97))]


@pytest.fixture(scope="module")
def tower_images(real_images) -> list[Image.Image]:
    out = []
    for name, size in SIZES:
        im = real_images.rgb(name)
        out.append(im if size is None else im.resize(size, Image.Resampling.BILINEAR))
    return out


@pytest.fixture(scope="module")
def towers() -> dict[str, Qwen2VisionTransformerPretrainedModel]:
    """A small random Qwen2-VL vision tower, in float32 and bfloat16.

    2 blocks, with the hub model's patch geometry (14 px patches, 2 frames, 2 x 2 merge) and
    transformers' own seeded random init."""
    cfg = Qwen2VLVisionConfig(depth=2, embed_dim=64, hidden_size=48, num_heads=4, mlp_ratio=2,
                              patch_size=14, temporal_patch_size=2, spatial_merge_size=2)
    torch.manual_seed(1234)
    f32 = Qwen2VisionTransformerPretrainedModel(cfg).eval().requires_grad_(False)
    return {"float32": f32, "bfloat16": copy.deepcopy(f32).to(torch.bfloat16)}


def embed(model, pixel_values: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(per-patch hidden states, merged embeddings: what the language model receives)."""
    with torch.no_grad():
        out = model(pixel_values, grid_thw=grid)
    return out.last_hidden_state, out.pooler_output


def assert_same_embeddings(model, ours, ref_pv: torch.Tensor, ref_grid: torch.Tensor) -> None:
    pv, grid = ours["pixel_values"], ours["image_grid_thw"]
    assert isinstance(pv, torch.Tensor) and isinstance(grid, torch.Tensor)
    assert grid.dtype == ref_grid.dtype == torch.int64 and torch.equal(grid, ref_grid)
    want = embed(model, ref_pv, ref_grid)
    got = embed(model, pv, grid)
    assert want[1].shape[0] == int(grid.prod(-1).sum()) // 4
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype == model.dtype
        assert torch.equal(g, w), f"{int((g != w).sum())} of {w.numel()} embedding values differ"


def assert_sensitive(model, ours) -> None:
    """The comparison is not vacuous: one value one ulp off changes the embeddings."""
    pv, grid = ours["pixel_values"].clone(), ours["image_grid_thw"]
    i = pv.shape[0] // 2, pv.shape[1] // 3
    pv[i] = torch.nextafter(pv[i], torch.tensor(10.0, dtype=pv.dtype))
    assert not torch.equal(embed(model, pv, grid)[1], embed(model, ours["pixel_values"], grid)[1])


@pytest.fixture(scope="module")
def hf_pil(tower_images) -> list[dict[str, torch.Tensor]]:
    """transformers' PIL processor: each image alone, then the whole list as one batch."""
    proc = hf_qwen(Qwen2VLImageProcessorPil, "qwen2_vl")
    return ([proc([im], return_tensors="pt") for im in tower_images]
            + [proc(tower_images, return_tensors="pt")])


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_pil_backend_same_embeddings(dtype, tower_images, towers, hf_pil):
    """The engine's flow.

    The processor's float32 pixel_values go into the tower, which casts them to its dtype;
    smg-fast's come in that dtype already (dtype="bfloat16")."""
    proc = load_processor("qwen2_vl")
    inputs = [[im] for im in tower_images] + [tower_images]
    for batch, ref in zip(inputs, hf_pil, strict=True):
        assert ref["pixel_values"].dtype == torch.float32
        ours = proc(batch, return_tensors="pt", dtype=dtype)
        assert ours["pixel_values"].dtype == DTYPES[dtype]
        assert_same_embeddings(towers[dtype], ours, ref["pixel_values"], ref["image_grid_thw"])
    assert_sensitive(towers[dtype], ours)


@pytest.fixture(scope="module")
def hf_torchvision(tower_images, tmp_path_factory) -> dict[str, np.ndarray]:
    """transformers' torchvision Qwen2VLImageProcessor on the whole list, in its own venv."""
    from support.tv_oracle import run_oracle

    from smg_fast.testing.oracles import qwen_kwargs

    job = {"cls": "qwen", "kwargs": qwen_kwargs("qwen2_vl"), "images": tower_images}
    return run_oracle(tmp_path_factory.mktemp("tower_tv"), [job])[0]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_torchvision_backend_same_embeddings(dtype, tower_images, towers, hf_torchvision):
    proc = load_processor("qwen2_vl", backend="torchvision")
    ours = proc(tower_images, return_tensors="pt", dtype=dtype)
    ref_pv = torch.from_numpy(hf_torchvision["pixel_values"])
    ref_grid = torch.from_numpy(hf_torchvision["grid"]).to(torch.int64)
    assert_same_embeddings(towers[dtype], ours, ref_pv, ref_grid)
    # The oracle's own bfloat16 cast (pixel_values.to(torch.bfloat16) in its venv) too.
    if dtype == "bfloat16":
        ref_bf16 = torch.from_numpy(hf_torchvision["bf16"]).view(torch.bfloat16)
        assert_same_embeddings(towers[dtype], ours, ref_bf16, ref_grid)
    assert_sensitive(towers[dtype], ours)
