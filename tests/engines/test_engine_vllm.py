"""vLLM's own request rendering with smg-fast's plugin on and off, run on CPU in vLLM's venv.

The rendering: chat template, tokenizer, its Qwen2-VL multimodal processor, run as its API server
runs it. Two plug-in-on processes render next to the plug-in-off one at the same time; a LLaVA-1.5
folder (transformers' CLIP image processor, which smg-fast does not serve) shows the plug-in
leaving a model it does not serve to transformers, with a log line saying so.

smg-fast enters the venv as an installed distribution (smg_fast.testing.engine_env's overlay:
the package plus the entry points pip wrote), so vLLM finds the plugin through its own
``vllm.general_plugins`` discovery. The reference is vLLM with the plugin off (transformers'
torchvision class, the processor vLLM builds by default): pixel_values (uint8 in vLLM's
device-normalize default; with it off, float32 cast by vLLM to the model's bfloat16), grids and
prompt token ids must be identical.
Without the venv (.ci/oracle_venv.sh vllm) these tests fail with a message naming the script.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from support.engine_common import assert_same_requests, engine_python_or_fail, finish, jpeg

from smg_fast.testing import vllm_runner
from smg_fast.testing.engine_env import make_overlay, start_in_venv

# By path, not -m: the runner must start even where the smg_fast package cannot be imported.
RUNNER = [vllm_runner.__file__]


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def vllm_requests(real_images) -> list[dict[str, Any]]:
    """A 1920x1080 photo as JPEG bytes, PIL images (RGB, RGBA, grey), several per prompt."""
    photo = real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS)
    pils = [("pil", real_images.rgb("astronaut")), ("pil", real_images.open("logo2")),
            ("pil", real_images.open("camera"))]
    coffee = real_images.rgb("coffee")
    # JPEGs the media connector leaves to vLLM's decoding (EXIF-rotated, grey, CMYK) and ones it
    # leaves undecoded (progressive, an orientation-1 tag)
    edge = [("jpeg", jpeg(coffee, exif_orientation=6)),
            ("jpeg", jpeg(coffee.convert("L"))), ("jpeg", jpeg(coffee.convert("CMYK"))),
            ("jpeg", jpeg(coffee, progressive=True)),
            ("jpeg", jpeg(coffee, exif_orientation=1))]
    return [
        {"images": [("jpeg", jpeg(photo)), *pils]},
        {"images": [("jpeg", real_images.bytes("rocket")), ("pil", coffee)],
         "mm_processor_kwargs": {"max_pixels": 200704, "min_pixels": 12544}},
        {"images": edge},
    ]


# vLLM's default (uint8 patches, normalized on the device) and CPU normalization (float32).
ENGINES = [{}, {"mm_device_do_normalize": False}]


def _start(python: Path, workdir: Path, folder: Path, requests: list[dict[str, Any]],
           overlay: Path, plugin: str, runs=ENGINES, env: dict[str, str] | None = None):
    workdir.mkdir(parents=True)
    job = {"folder": str(folder), "runs": [{"engine": e, "requests": requests} for e in runs]}
    (workdir / "job.pkl").write_bytes(pickle.dumps(job))
    return start_in_venv(python, [*RUNNER, str(workdir)], overlay,
                         {"SMG_FAST_VLLM": plugin, **(env or {})})


def _assert_same(ours: dict[str, Any], ref: dict[str, Any],
                 fields: tuple[str, ...] = ("pixel_values", "image_grid_thw")) -> None:
    for run_ours, run_ref in zip(ours["runs"], ref["runs"], strict=True):
        assert_same_requests(run_ours["requests"], run_ref["requests"], fields)


@pytest.fixture(scope="module")
def vllm_three(vllm_python, folder, vllm_requests, tmp_path_factory):
    """The same requests rendered by three vLLM processes at once: the plugin on, on, and off.

    The second plug-in-on process renders vLLM's default mode only (its own check: two engine
    processes with smg-fast at the same time)."""
    base = tmp_path_factory.mktemp("vllm-runs")
    overlay = make_overlay(base / "overlay")
    on = _start(vllm_python, base / "on", folder, vllm_requests, overlay, "1")
    on2 = _start(vllm_python, base / "on2", folder, vllm_requests, overlay, "1",
                 runs=ENGINES[:1])
    off = _start(vllm_python, base / "off", folder, vllm_requests, overlay, "0")
    return (finish(on, base / "on", "vLLM"), finish(on2, base / "on2", "vLLM"),
            finish(off, base / "off", "vLLM"))


@pytest.fixture(scope="module")
def vllm_runs(vllm_three):
    """The plug-in-on and plug-in-off renders of vllm_three."""
    on, _, off = vllm_three
    return on, off


def test_plugin_on_is_smg_fast_and_identical_to_vllm_without_it(vllm_runs, folder):
    (ours, ours_log), (ref, ref_log) = vllm_runs
    for run in ours["runs"]:
        assert run["image_processor"].startswith("smg_fast."), run["image_processor"]
        assert run["media_connector"] == "smg_fast.integrations.vllm_media.SmgFastMediaConnector"
    for run in ref["runs"]:
        assert run["image_processor"].startswith("transformers."), run["image_processor"]
        assert run["media_connector"].startswith("vllm."), run["media_connector"]
    # the load-time line, then the line for the model vLLM serves
    assert "installed in vLLM for model types qwen2_vl" in ours_log
    assert "(for qwen2_vl smg_fast.hf.Qwen2VLImageProcessor;" in ours_log
    assert _model_lines(ours_log) == [
        f"vLLM's Qwen2VLProcessor for {folder} (qwen2_vl) computes images with "
        "smg_fast.hf.Qwen2VLImageProcessor (smg-fast serves qwen2_vl)"]
    assert "SMG_FAST_VLLM=0, vLLM keeps" in ref_log
    assert _model_lines(ref_log) == [
        f"vLLM's Qwen2VLProcessor for {folder} (qwen2_vl) computes images with transformers."
        "models.qwen2_vl.image_processing_qwen2_vl.Qwen2VLImageProcessor (SMG_FAST_VLLM=0)"]
    assert "hands calls" not in ours_log  # smg-fast computed every call, none handed back
    _assert_same(ours, ref)
    uint8_run, float_run = ours["runs"]
    assert uint8_run["requests"][0]["fields"]["pixel_values"][0].dtype == np.uint8
    # the request's max_pixels reached the processor (427x640 and 400x600 scaled down)
    grids = [g.tolist() for g in uint8_run["requests"][1]["fields"]["image_grid_thw"]]
    assert grids == [[1, 26, 38], [1, 26, 38]], grids
    # vLLM casts CPU-normalized pixels to the model's dtype (bfloat16: kept as its uint16 bits)
    assert float_run["requests"][0]["fields"]["pixel_values"][0].dtype == np.uint16


def _model_lines(log: str) -> list[str]:
    """The plug-in's per-model lines in a vLLM log, from "vLLM's" on."""
    return [ln.split("smg-fast: ", 1)[1] for ln in log.splitlines()
            if "smg-fast: vLLM's " in ln and " computes images with " in ln]


def test_two_vllm_processes_with_the_plugin_at_once(vllm_three):
    """Two plug-in-on vLLM processes render at the same time; both equal vLLM without it."""
    (ours, _), (ours2, log2), (ref, _) = vllm_three
    run = ours2["runs"][0]
    assert run["image_processor"].startswith("smg_fast."), run["image_processor"]
    assert run["media_connector"] == "smg_fast.integrations.vllm_media.SmgFastMediaConnector"
    assert "hands calls" not in log2
    _assert_same(ours2, {"runs": ref["runs"][:1]})
    _assert_same({"runs": ours["runs"][:1]}, ours2)


@pytest.fixture(scope="module")
def llava_runs(vllm_python, real_images, tmp_path_factory):
    """A LLaVA-1.5 folder rendered by two vLLM processes at once, the plug-in on and off.

    Its image processor is transformers' CLIPImageProcessor, a class smg-fast does not serve."""
    from smg_fast.testing.model_folders import make_llava_folder

    base = tmp_path_factory.mktemp("vllm-llava")
    llava = make_llava_folder(base / "llava-1.5-7b-hf")
    photo = real_images.rgb("hubble").resize((1920, 1080), Image.Resampling.LANCZOS)
    coffee = real_images.rgb("coffee")
    requests = [{"images": [("jpeg", jpeg(photo)), ("pil", real_images.rgb("astronaut")),
                            ("pil", real_images.open("camera"))]},
                {"images": [("jpeg", real_images.bytes("rocket")),
                            ("jpeg", jpeg(coffee, exif_orientation=6))]}]
    overlay = make_overlay(base / "overlay")
    on = _start(vllm_python, base / "on", llava, requests, overlay, "1", runs=ENGINES[:1])
    off = _start(vllm_python, base / "off", llava, requests, overlay, "0", runs=ENGINES[:1])
    return llava, finish(on, base / "on", "vLLM"), finish(off, base / "off", "vLLM")


def test_a_model_smg_fast_does_not_serve_keeps_transformers_processor(llava_runs):
    """LLaVA-1.5 with the plug-in on: vLLM works with transformers' CLIP class.

    Outputs equal the plug-in off's, and the per-model line names the class and why."""
    llava, (ours, ours_log), (ref, ref_log) = llava_runs
    clip = "transformers.models.clip.image_processing_clip.CLIPImageProcessor"
    for result in (ours, ref):
        run = result["runs"][0]
        assert run["image_processor"] == clip, run["image_processor"]
        assert {r["image_processor"] for r in run["requests"]} == {clip}
    assert _model_lines(ours_log) == [f"vLLM's LlavaProcessor for {llava} (llava) computes images "
                                      f"with {clip} (smg-fast does not serve llava)"]
    assert _model_lines(ref_log) == [f"vLLM's LlavaProcessor for {llava} (llava) computes images "
                                     f"with {clip} (SMG_FAST_VLLM=0)"]
    assert ours["runs"][0]["requests"][0]["fields"]["pixel_values"][0].shape == (3, 336, 336)
    _assert_same(ours, ref, fields=("pixel_values",))


def test_plugin_without_native_module_leaves_vllm_working(vllm_python, folder, vllm_requests,
                                                          vllm_runs, tmp_path):
    """A broken install (no compiled extension).

    A clear error, vLLM's own processor, same results."""
    overlay = make_overlay(tmp_path / "overlay", with_native=False)
    result, log = finish(_start(vllm_python, tmp_path / "run", folder, vllm_requests[:1], overlay,
                                "1", runs=ENGINES[:1]), tmp_path / "run", "vLLM")
    assert result["runs"][0]["image_processor"].startswith("transformers.")
    assert "smg_fast._native" in log
    (_, _), (ref, _) = vllm_runs
    ref_first = {"runs": [{**ref["runs"][0], "requests": ref["runs"][0]["requests"][:1]}]}
    _assert_same(result, ref_first)


@pytest.mark.parametrize("env", [{"SMG_FAST_VLLM_DECODE": "0"}, {"VLLM_MEDIA_CONNECTOR": "http"}],
                         ids=["decode-off", "user-connector"])
def test_vllm_decodes_itself_when_told(vllm_python, folder, vllm_requests, vllm_runs, tmp_path,
                                       env):
    """SMG_FAST_VLLM_DECODE=0, or a connector the user chose: vLLM's own decoding, same results."""
    overlay = make_overlay(tmp_path / "overlay")
    requests = vllm_requests[:1] + vllm_requests[2:]
    result, log = finish(_start(vllm_python, tmp_path / "run", folder, requests, overlay, "1",
                                runs=ENGINES[:1], env=env), tmp_path / "run", "vLLM")
    run = result["runs"][0]
    assert run["image_processor"].startswith("smg_fast."), run["image_processor"]
    assert run["media_connector"].startswith("vllm."), run["media_connector"]
    assert "decodes request images" in log
    (_, _), (ref, _) = vllm_runs
    ref_run = ref["runs"][0]
    _assert_same(result, {"runs": [{**ref_run, "requests": [ref_run["requests"][0],
                                                             ref_run["requests"][2]]}]})


_CONNECTOR_ERRORS = r"""
import base64, io, json, sys
from PIL import Image
import smg_fast.integrations.vllm as plugin
plugin.register()
from vllm.multimodal.media.connector import MEDIA_CONNECTOR_REGISTRY
buf = io.BytesIO()
Image.new("RGB", (400, 300), (9, 99, 199)).save(buf, "JPEG")
url = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
out = {}
for name in ("smg_fast", "http"):
    try:
        MEDIA_CONNECTOR_REGISTRY.load(name).fetch_image(url)
        out[name] = "loaded"
    except Exception as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def test_connector_refuses_images_with_vllms_own_error(vllm_python, tmp_path):
    """An image over VLLM_MAX_IMAGE_PIXELS: the client sees vLLM's error, word for word."""
    import json

    from smg_fast.testing.engine_env import run_in_venv

    overlay = make_overlay(tmp_path / "overlay")
    proc = run_in_venv(vllm_python, ["-c", _CONNECTOR_ERRORS], overlay,
                       {"VLLM_MAX_IMAGE_PIXELS": "100000"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["http"].startswith("ValueError: Image dimensions 400x300"), out
    assert out["smg_fast"] == out["http"]


_CHILD_WITHOUT_PLUGIN = r"""
import os, subprocess, sys
import smg_fast.integrations.vllm as plugin
plugin.register()
child = ("import vllm.envs as envs\n"
         "from vllm.multimodal.media.connector import MEDIA_CONNECTOR_REGISTRY\n"
         "MEDIA_CONNECTOR_REGISTRY.load(envs.VLLM_MEDIA_CONNECTOR)\n"
         "print('child loaded its connector')")
# a vLLM the parent starts that does not load smg-fast (its own plug-in list, another venv)
env = dict(os.environ, VLLM_PLUGINS="")
proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True)
print(proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else proc.stderr[-400:])
"""


def test_a_child_vllm_without_the_plugin_keeps_a_working_connector(vllm_python, tmp_path):
    """A vLLM started by a process that ran the plug-in, not loading it, finds its connector."""
    from smg_fast.testing.engine_env import run_in_venv

    overlay = make_overlay(tmp_path / "overlay")
    proc = run_in_venv(vllm_python, ["-c", _CHILD_WITHOUT_PLUGIN], overlay, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "child loaded its connector", proc.stdout[-600:]
