"""SGLang's own multimodal request processing with smg-fast's plug-in on and off, run on CPU.

Its get_processor, its Qwen-VL multimodal processor's process_mm_data_async, as its TokenizerManager
calls it, run in SGLang's venv; and SGLang's native Rust path as a peer.

smg-fast enters the venv as an installed distribution (smg_fast.testing.engine_env's overlay: the
package plus the entry points pip wrote), so SGLang's ``load_plugins()`` finds the plug-in in
the ``sglang.srt.plugins`` group. The reference is SGLang with the plug-in off (transformers'
classes, as SGLang builds them): pixel_values, grids and prompt token ids must be identical, for
SGLang's default (torchvision class) and ``--image-processor-backend pil``. Without the venv
(.ci/oracle_venv.sh sglang) these tests fail with a message naming the script.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from support.engine_common import assert_same_requests, engine_python_or_fail, finish, jpeg

from smg_fast.testing.engine_env import make_overlay, start_in_venv
from smg_fast.testing.model_folders import make_qwen_folder

# Run by file path: a process whose smg_fast has no native module cannot import the package.
RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
# SGLang's default (transformers' torchvision class), --image-processor-backend pil, image
# options through --mm-process-config (pixel limits; do_rescale without do_normalize, both
# computed by smg-fast), and a Qwen3-VL folder.
SERVERS = [{}, {"image_processor_backend": "pil"},
           {"mm_process_config": {"image": {"max_pixels": 200704, "min_pixels": 12544}}},
           {"mm_process_config": {"image": {"do_rescale": True, "do_normalize": False}}}]
QWEN3 = len(SERVERS)  # the run index of the Qwen3-VL folder


@pytest.fixture(scope="module")
def sglang_python() -> Path:
    return engine_python_or_fail("sglang")


@pytest.fixture(scope="module")
def sglang_requests(real_images) -> list[dict[str, Any]]:
    """Two requests of JPEG bytes and PIL images, some with transparency.

    A 1920x1080 photo as JPEG bytes, PIL images (RGB, RGBA, grey, palette with a transparent index),
    several per prompt. SGLang's Qwen3-VL path hands PIL images to the image processor as they are,
    so transparency meets the convert_to_rgb of SGLang's transformers (5.19: the alpha dropped)."""
    photo = real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS)
    pils = [("pil", real_images.rgb("astronaut")), ("pil", real_images.open("logo2")),
            ("pil", real_images.open("camera"))]
    palette = real_images.rgb("coffee").convert("P")
    palette.info["transparency"] = 0
    return [
        {"images": [("jpeg", jpeg(photo)), *pils]},
        {"images": [("jpeg", real_images.bytes("rocket")), ("pil", palette)]},
    ]


def _jpeg_only(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"images": [im for im in r["images"] if im[0] == "jpeg"]} for r in requests]


def _start(python: Path, workdir: Path, folder: Path, runs: list[dict[str, Any]],
           overlay: Path, plugin: str):
    workdir.mkdir(parents=True)
    (workdir / "job.pkl").write_bytes(pickle.dumps({"folder": str(folder), "runs": runs}))
    script = overlay / "smg_fast" / "testing" / "sglang_runner.py"
    return start_in_venv(python, ["-c", RUNNER, str(script), str(workdir)], overlay,
                         {"SMG_FAST_SGLANG": plugin})


@pytest.fixture(scope="module")
def sglang_runs(sglang_python, folder, sglang_requests, tmp_path_factory):
    """The same requests processed by two SGLang processes at once.

    The plug-in on, and off (that one also runs SGLang's Rust path on the requests' JPEGs)."""
    base = tmp_path_factory.mktemp("sglang-runs")
    overlay = make_overlay(base / "overlay")
    qwen3 = make_qwen_folder(base / "Qwen3-VL-8B-Instruct", "qwen3_vl")
    runs = [*({"server": s, "requests": sglang_requests} for s in SERVERS),
            {"folder": str(qwen3), "requests": sglang_requests}]
    rust = {"mode": "rust", "requests": _jpeg_only(sglang_requests)}
    on = _start(sglang_python, base / "on", folder, runs, overlay, "1")
    off = _start(sglang_python, base / "off", folder, [*runs, rust], overlay, "0")
    return finish(on, base / "on", "SGLang"), finish(off, base / "off", "SGLang")


def test_plugin_on_is_smg_fast_and_identical_to_sglang_without_it(sglang_runs):
    (ours, ours_log), (ref, ref_log) = sglang_runs
    names = ["Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil", *["Qwen2VLImageProcessor"] * 3]
    assert [r["image_processor"] for r in ours["runs"]] == [f"smg_fast.hf.{n}" for n in names]
    off = ref["runs"][:len(names)]
    assert [r["image_processor"].rsplit(".", 1)[1] for r in off] == names
    assert all(r["image_processor"].startswith("transformers.") for r in off)
    # The one INFO line, either way, naming the class SGLang's multimodal processor calls.
    assert "computes images with smg_fast.hf.Qwen2VLImageProcessor" in ours_log
    assert "computes images with transformers." in ref_log and "SMG_FAST_SGLANG=0" in ref_log
    # smg-fast computed every call, the per-request options included: none handed back.
    assert "hands calls to transformers'" not in ours_log, ours_log[-3000:]
    for run_ours, run_ref in zip(ours["runs"], off, strict=True):
        assert_same_requests(run_ours["requests"], run_ref["requests"])
    limited = ours["runs"][2]["requests"][0]["fields"]["image_grid_thw"][0]
    assert int(np.prod(limited)) * 14 * 14 <= 200704  # the configured limit applied
    assert ours["runs"][QWEN3]["requests"][0]["fields"]["pixel_values"][0].shape[1] == 1536
    photo = ours["runs"][0]["requests"][0]["fields"]
    assert photo["pixel_values"][0].dtype == np.float32
    assert photo["pixel_values"][0].shape[0] == int(np.prod(photo["image_grid_thw"][0]))


def test_plugin_without_native_module_leaves_sglang_working(sglang_python, folder, sglang_requests,
                                                            sglang_runs, tmp_path):
    """A broken install (no compiled extension).

    A clear error, SGLang's own processor, the same results."""
    overlay = make_overlay(tmp_path / "overlay", with_native=False)
    runs = [{"server": SERVERS[0], "requests": sglang_requests[:1]}]
    result, log = finish(_start(sglang_python, tmp_path / "run", folder, runs, overlay, "1"),
                         tmp_path / "run", "SGLang")
    assert result["runs"][0]["image_processor"].startswith("transformers.")
    # The package's import names the cause; SGLang logs it and goes on without the plug-in.
    assert "Failed to load plugin smg_fast" in log
    assert "smg_fast._native does not load" in log and "reinstall smg-fast" in log
    (_, _), (ref, _) = sglang_runs
    assert_same_requests(result["runs"][0]["requests"], ref["runs"][0]["requests"][:1])


def test_sglang_rust_path_shape_on_the_same_jpegs(sglang_runs):
    """SGLang's Rust path gives transformers' grids and layout on the same JPEGs.

    From JPEG bytes, next to transformers on Pillow's decode (SGLang with the plug-in off); its
    values are reported, not required equal (its JPEG decoder is not Pillow's)."""
    (_, _), (ref, _) = sglang_runs
    rust, pillow = ref["runs"][-1], ref["runs"][0]
    assert '"resample": "aten_u8"' in rust["spec"]
    for req_rust, req_ref in zip(rust["requests"], pillow["requests"], strict=True):
        grids = req_rust["fields"]["image_grid_thw"]
        # The JPEG is each request's first image in SGLang's own run.
        assert np.array_equal(grids[0], req_ref["fields"]["image_grid_thw"][0])
        pixels, expected = req_rust["fields"]["pixel_values"][0], req_ref["fields"][
            "pixel_values"][0]
        assert pixels.dtype == np.float32 and pixels.shape == expected.shape
        assert np.isfinite(pixels).all()
        differing = float(np.mean(pixels != expected))
        print(f"Rust path vs transformers on Pillow's decode: {differing:.1%} of "
              f"{pixels.size} values differ, max |diff| "
              f"{float(np.max(np.abs(pixels - expected))):.4f}")

