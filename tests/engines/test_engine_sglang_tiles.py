"""SGLang's own Pixtral and Llama 4 request processing with smg-fast's plug-in on and off, on CPU.

SGLang's get_processor and its multimodal processors (LlavaMultimodalProcessor, which hands a
llava config with a Pixtral encoder to its PixtralProcessor, and Mllama4ImageProcessor) on the
tiny pixtral-12b (model_type llava) and Llama-4-Scout-17B-16E-Instruct folders
(smg_fast.testing.model_folders_tiles), one SGLang process per arm. The reference is SGLang with
the plug-in off (transformers' PixtralImageProcessor and Llama4ImageProcessor): every image field
SGLang keeps and the prompt token ids must be identical, with smg-fast's class in use.

The other tiling families do not reach transformers' classes in SGLang 0.5.23: it has no model for
the LLaVA-NeXT / OneVision -hf, Idefics3 or SmolVLM checkpoints, and computes InternVL with its
own code (original checkpoints only).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.engine_common import assert_same_requests, jpeg, photo_1080p, run_on_and_off
from test_engine_sglang import _start

from smg_fast.testing.model_folders_tiles import make_tiles_folder

# family -> (smg-fast's class, transformers' class, the image fields SGLang keeps)
FAMILIES = {
    "pixtral": ("PixtralImageProcessor", "pixtral.image_processing_pixtral",
                ("pixel_values", "image_sizes")),
    "llama4": ("Llama4ImageProcessor", "llama4.image_processing_llama4", ("pixel_values",)),
}


@pytest.fixture(scope="module")
def sglang_runs(sglang_python, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image, then a grey PIL image, per family: plug-in on, off."""
    base = tmp_path_factory.mktemp("sglang-tiles-runs")
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                            ("pil", real_images.rgb("astronaut"))]},
                {"images": [("pil", real_images.open("camera"))]}]
    folders = [make_tiles_folder(base / family, family) for family in FAMILIES]
    runs = [{"folder": str(f), "requests": requests} for f in folders]

    def start(work: Path, plugin: str, overlay: Path):
        return _start(sglang_python, work, folders[0], runs, overlay, plugin)

    return run_on_and_off(start, base, "SGLang")


@pytest.mark.parametrize("family", FAMILIES)
def test_sglang_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(sglang_runs, family):
    """smg-fast's class computes the family's images in SGLang, identical to transformers'."""
    (ours, ours_log), (ref, _) = sglang_runs
    name, module, fields = FAMILIES[family]
    run_ours, run_ref = (dict(zip(FAMILIES, r["runs"], strict=True))[family]
                         for r in (ours, ref))
    assert run_ours["image_processor"] == f"smg_fast.hf.{name}"
    assert run_ref["image_processor"] == f"transformers.models.{module}.{name}"
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    assert_same_requests(run_ours["requests"], run_ref["requests"], fields)
    pixels = np.concatenate([p.reshape(-1) for p in run_ours["requests"][0]["fields"][
        "pixel_values"]])
    # Llama 4's processor returns bfloat16 (kept as its uint16 bits), Pixtral's float32
    assert pixels.dtype == (np.uint16 if family == "llama4" else np.float32)
