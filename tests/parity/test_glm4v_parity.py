"""Bit-exact parity of GLM-4.1V / 4.5V / 4.6V / GLM-OCR with transformers' PIL classes.

transformers' Glm4vImageProcessorPil (GLM-4.1V, GLM-4.5V = glm4v_moe, GLM-OCR) and
Glm46VImageProcessorPil (GLM-4.6V), configured as GLM-4.1V-9B-Thinking's published
preprocessor_config.json (size 12544..9633792, patch 14, merge 2, temporal 2, CLIP mean/std; the
numbers are also the defaults of transformers' glm4v smart_resize), against smg-fast loaded from
model folders: np.array_equal on float32 pixel_values, image_grid_thw and token counts, on real
photos, every PIL mode, encoded bytes, EXIF-rotated JPEGs, 16-bit PNGs and edge sizes.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from support.images import encode
from transformers.image_utils import load_image
from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil
from transformers.models.glm4v.image_processing_pil_glm4v import smart_resize as hf_glm_resize
from transformers.models.glm46v.image_processing_pil_glm46v import Glm46VImageProcessorPil

from smg_fast import InvalidImageError, load_processor
from smg_fast.testing.oracles import glm_kwargs, hf_glm

# model_type -> (family, the class its preprocessor_config.json names, transformers' PIL class)
MODELS = {
    "glm4v": ("glm4v", "Glm4vImageProcessor", Glm4vImageProcessorPil),
    "glm4v_moe": ("glm4v", "Glm4vImageProcessor", Glm4vImageProcessorPil),
    "glm_ocr": ("glm4v", "Glm4vImageProcessor", Glm4vImageProcessorPil),
    "glm46v": ("glm46v", "Glm46VImageProcessor", Glm46VImageProcessorPil),
}
EDGE_SIZES = [(1, 1), (5, 3), (27, 29), (28, 28), (1, 200), (200, 1), (3, 600), (13, 1100),
              (27, 5000), (56, 11000), (70, 98), (2000, 11), (4000, 3000)]
REFUSED_SIZES = [(1, 201), (3, 601), (2, 403), (27, 5500), (11000, 50)]


def write_folder(path, model_type: str, named: str, pre: dict | None = None):
    path.mkdir(parents=True, exist_ok=True)
    pre = {**(pre if pre is not None else glm_kwargs("glm4v")), "image_processor_type": named}
    (path / "preprocessor_config.json").write_text(json.dumps(pre))
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("glm")
    return {mt: write_folder(root / mt, mt, named) for mt, (_, named, _) in MODELS.items()}


@pytest.fixture(scope="module")
def glm(folders):
    """glm(model_type) -> smg-fast's PIL-backend processor loaded from that model's folder."""
    procs = {mt: load_processor(folders[mt], backend="pil") for mt in MODELS}
    return procs.__getitem__


@pytest.fixture(scope="module")
def ref():
    """ref(model_type) -> transformers' PIL class for it, from the hub config."""
    procs = {mt: hf_glm(cls, family) for mt, (family, _, cls) in MODELS.items()}
    return procs.__getitem__


@pytest.fixture(params=list(MODELS))
def model_type(request) -> str:
    return request.param


def check(out, ref_pv, ref_grid, merge: int = 2) -> None:
    grid = np.asarray(out["image_grid_thw"])
    assert grid.dtype == np.int64 and grid.tolist() == np.asarray(ref_grid).tolist()
    pv = np.asarray(out["pixel_values"])
    assert pv.dtype == np.float32 and pv.shape == np.asarray(ref_pv).shape
    assert np.array_equal(pv, np.asarray(ref_pv))
    tokens = [int(v) for v in np.asarray(out["num_tokens"]).reshape(-1)]
    assert tokens == [t * h * w // merge**2 for t, h, w in grid.tolist()]


def from_bytes(data: bytes):
    """What transformers' processors get for encoded bytes (load_image: EXIF, alpha on white)."""
    return load_image(base64.b64encode(data).decode("ascii"))


def test_folders_load_as_their_family(folders, model_type):
    family, _, _ = MODELS[model_type]
    proc = load_processor(folders[model_type])
    cfg = proc.config
    assert cfg.family == family and cfg.backend == "torchvision"  # the folder names it
    assert (cfg.min_pixels, cfg.max_pixels) == (12544, 9633792)
    assert (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size) == (14, 2, 2)


def test_real_image(model_type, real_image_name, real_images, glm, ref, hf_run):
    ref_pv, ref_grid = hf_run(ref(model_type), real_images.open(real_image_name))
    check(glm(model_type)(real_images.open(real_image_name), return_tensors="np"), ref_pv,
          ref_grid)


def test_pil_mode(mode_kind, real_images, glm, ref, hf_run):
    ref_pv, ref_grid = hf_run(ref("glm4v"), real_images.mode_image(mode_kind))
    check(glm("glm4v")(real_images.mode_image(mode_kind), return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("name", ["rocket", "chelsea", "camera", "logo2", "png16", "rgba_png"])
def test_encoded_bytes(model_type, name, real_images, glm, ref, hf_run):
    if name == "png16":
        data = encode(real_images.mode_image("I;16"), "PNG")
    elif name == "rgba_png":
        data = encode(real_images.mode_image("RGBA"), "PNG")
    else:
        data = real_images.bytes(name)
    ref_pv, ref_grid = hf_run(ref(model_type), from_bytes(data))
    check(glm(model_type)(data, return_tensors="np"), ref_pv, ref_grid)


def test_exif_rotated(model_type, exif_rotated_jpeg, glm, ref, hf_run):
    ref_pv, ref_grid = hf_run(ref(model_type), load_image(str(exif_rotated_jpeg)))
    for src in (str(exif_rotated_jpeg), exif_rotated_jpeg.read_bytes()):
        check(glm(model_type)(src, return_tensors="np"), ref_pv, ref_grid)


def test_arrays_and_batch(real_images, glm, ref, hf_run):
    images = [real_images.rgb_array("coffee"), real_images.open("chelsea"),
              np.asarray(real_images.open("camera"))[:, :, None].copy(),
              real_images.rgb("astronaut").crop((0, 0, 5, 3))]
    ref_pv, ref_grid = hf_run(ref("glm4v"), images)
    check(glm("glm4v")(images, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("w,h", EDGE_SIZES)
def test_edge_sizes(model_type, w, h, real_images, glm, ref, hf_run):
    """Tiny images are scaled up before the budget; the aspect limit applies after that."""
    src = real_images.rgb("astronaut").resize((max(w, 64), max(h, 64)))
    image = src.crop((0, 0, w, h))
    ref_pv, ref_grid = hf_run(ref(model_type), image)
    check(glm(model_type)(image, return_tensors="np"), ref_pv, ref_grid)


@pytest.mark.parametrize("w,h", REFUSED_SIZES)
def test_refused_where_transformers_refuses(w, h, real_images, glm):
    image = real_images.rgb("astronaut").resize((w, h))
    with pytest.raises(ValueError, match="aspect ratio"):
        hf_glm_resize(2, h, w, temporal_factor=2, factor=28, min_pixels=12544,
                      max_pixels=9633792)
    with pytest.raises(InvalidImageError, match=r"\bimage 1\b.*aspect ratio"):
        glm("glm4v")([real_images.open("chelsea"), image], return_tensors="np")


def test_the_budget_counts_the_temporal_factor(glm):
    """3000x2000: Qwen's rule keeps 2996x1988 (under 9633792 pixels); GLM's halves the budget."""
    hf_h, hf_w = hf_glm_resize(2, 2000, 3000, temporal_factor=2, factor=28, min_pixels=12544,
                               max_pixels=9633792)
    assert glm("glm4v").grid(3000, 2000) == (1, hf_h // 14, hf_w // 14)
    assert 2 * hf_h * hf_w <= 9633792 < 2 * 1988 * 2996
    assert load_processor("qwen2_vl", min_pixels=12544, max_pixels=9633792).grid(3000, 2000) == \
        (1, 1988 // 14, 2996 // 14)


def test_folder_without_model_type_is_recognized(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    for named, family in (("Glm4vImageProcessor", "glm4v"), ("Glm46VImageProcessorPil", "glm46v")):
        (folder / "preprocessor_config.json").write_text(
            json.dumps({**glm_kwargs("glm4v"), "image_processor_type": named}))
        proc = load_processor(folder)
        assert proc.config.family == family
        assert proc.config.backend == ("pil" if named.endswith("Pil") else "torchvision")


def test_folder_numbers_win_and_top_level_pixels_change_nothing(tmp_path, real_images, hf_run):
    """transformers' GLM classes read the budget from size only; other numbers come through."""
    pre = {**glm_kwargs("glm4v"), "size": {"shortest_edge": 3136, "longest_edge": 1003520},
           "min_pixels": 1, "max_pixels": 10**9}
    folder = write_folder(tmp_path / "g", "glm4v", "Glm4vImageProcessorPil", pre)
    proc = load_processor(folder)
    assert (proc.config.min_pixels, proc.config.max_pixels, proc.config.backend) == \
        (3136, 1003520, "pil")
    ours = proc(real_images.open("hubble"), return_tensors="np")
    theirs = Glm4vImageProcessorPil.from_pretrained(folder)
    ref_pv, ref_grid = hf_run(theirs, real_images.open("hubble"))
    check(ours, ref_pv, ref_grid)


def test_call_options(real_images, glm, ref, hf_run):
    """size / patch_size / merge_size at call time, as transformers' class reads them."""
    image = real_images.open("rocket")
    for opts in ({"size": {"shortest_edge": 3136, "longest_edge": 200000}},
                 {"patch_size": 16}, {"merge_size": 1}):
        ref_pv, ref_grid = hf_run(ref("glm4v"), real_images.open("rocket"), **opts)
        check(glm("glm4v")(image, return_tensors="np", **opts), ref_pv, ref_grid,
              merge=opts.get("merge_size", 2))
