"""SGLang's own GLM-4.1V and GLM-OCR request processing with smg-fast's plug-in on and off, on CPU.

SGLang's get_processor and its GLM multimodal processor (tests/engines/test_engine_sglang.py's
runner) on the tiny GLM-4.1V-9B-Thinking and GLM-OCR folders, one SGLang process per arm. The
reference is SGLang with the plug-in off (transformers' Glm4v / Glm46V image processors):
pixel_values, grids and prompt token ids must be identical, with smg-fast's class in use.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.engine_common import (
    assert_same_requests,
    engine_python_or_fail,
    jpeg,
    photo_1080p,
    run_on_and_off,
)
from test_engine_sglang import _start

from smg_fast.testing.model_folders import make_glm_folder

# family -> (folder name, the smg_fast.hf class SGLang must build with the plug-in on)
MODELS = {"glm4v": ("GLM-4.1V-9B-Thinking", "Glm4vImageProcessor"),
          "glm_ocr": ("GLM-OCR", "Glm46VImageProcessor")}


@pytest.fixture(scope="module")
def sglang_python() -> Path:
    return engine_python_or_fail("sglang")


@pytest.fixture(scope="module")
def glm_sglang_runs(sglang_python, real_images, tmp_path_factory):
    """A 1920x1080 JPEG and a PIL RGB image, each GLM folder, by two SGLang processes: on, off."""
    base = tmp_path_factory.mktemp("sglang-glm-runs")
    requests = [{"images": [("jpeg", jpeg(photo_1080p(real_images))),
                            ("pil", real_images.rgb("astronaut"))]}]
    folders = [make_glm_folder(base / name, family) for family, (name, _) in MODELS.items()]
    runs = [{"folder": str(f), "requests": requests} for f in folders]

    def start(work, plugin, overlay):
        return _start(sglang_python, work, folders[0], runs, overlay, plugin)

    return run_on_and_off(start, base, "SGLang")


def test_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(glm_sglang_runs):
    """smg-fast's GLM classes compute SGLang's GLM images, identical to transformers'."""
    (ours, ours_log), (ref, _) = glm_sglang_runs
    names = [cls for _, cls in MODELS.values()]
    assert [r["image_processor"] for r in ours["runs"]] == [f"smg_fast.hf.{n}" for n in names]
    for run, name in zip(ref["runs"], names, strict=True):
        assert run["image_processor"].startswith("transformers."), run["image_processor"]
        assert run["image_processor"].endswith(f".{name}"), run["image_processor"]
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert_same_requests(run_ours["requests"], run_ref["requests"])
        grids = [g.reshape(-1).tolist() for g in run_ours["requests"][0]["fields"][
            "image_grid_thw"]]
        assert grids == [[1, 78, 138], [1, 36, 36]]
