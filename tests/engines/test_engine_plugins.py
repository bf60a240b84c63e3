"""The vLLM and SGLang plug-in modules, run as the engines' plug-in loaders run them.

The loaders load the entry point, log a failure, call it; each case runs in a fresh process (neither
engine is installed here: the modules import nothing from them). On by default with one INFO line
naming the class in use, off with SMG_FAST_VLLM=0 / SMG_FAST_SGLANG=0, and a native module that does
not load leaves transformers' processors in place with an error naming the cause (the engine still
starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import smg_fast

ROOT = Path(__file__).resolve().parents[2]
PRE = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
       "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
       "image_mean": [0.48145466, 0.4578275, 0.40821073],
       "image_std": [0.26862954, 0.26130258, 0.27577711]}

ENGINES = {"vllm": ("vllm.general_plugins", "SMG_FAST_VLLM"),
           "sglang": ("sglang.srt.plugins", "SMG_FAST_SGLANG")}
# What the engine does with the entry point, then what its processor loading does.
SCRIPT = """
import json, logging, sys
def configure_logging():
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(message)s")
if sys.argv[3] != "late-logging":
    configure_logging()
if sys.argv[3] == "no-native":
    sys.modules["smg_fast._native"] = None  # the import fails as a broken build's would
first = second = False
try:  # vLLM's loader: entry point load failures are logged, the engine goes on
    import importlib
    plugin = importlib.import_module("smg_fast.integrations." + sys.argv[2])
    heavy = sorted(m for m in sys.modules
                   if m.split(".")[0] in ("vllm", "sglang", "torch", "transformers"))
    first, second = plugin.register(), plugin.register()
except Exception as exc:
    heavy = []
    logging.getLogger(sys.argv[2] + ".plugins").error("Failed to load plugin smg_fast: %s", exc)
if sys.argv[3] == "late-logging":  # vLLM's offline LLM: plug-ins load, then logging is set up
    configure_logging()
from transformers import AutoImageProcessor
proc = AutoImageProcessor.from_pretrained(sys.argv[1])
from PIL import Image
print(json.dumps({"first": first, "second": second, "heavy_at_import": heavy,
                  "class": type(proc).__module__ + "." + type(proc).__name__,
                  "one_block": Image.new("RGB", (2600, 1800)).im.isblock()}))
"""


@pytest.fixture(scope="module")
def bare_folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2_vl")
    (d / "preprocessor_config.json").write_text(json.dumps(PRE))
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
    return d


def run(folder: Path, engine: str, mode: str, **env: str) -> tuple[dict, list[str]]:
    src = str(Path(smg_fast.__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), engine, mode], text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": src, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(engine + ".")]
    return json.loads(proc.stdout.strip().splitlines()[-1]), lines


@pytest.mark.parametrize("engine", ENGINES)
def test_entry_point_is_declared(engine):
    text = (ROOT / "pyproject.toml").read_text()  # no tomllib on Python 3.10
    section = text.split(f'[project.entry-points."{ENGINES[engine][0]}"]\n', 1)[1]
    entries = section.split("\n[", 1)[0].split("\n\n", 1)[0].strip().splitlines()
    assert entries == [f'smg_fast = "smg_fast.integrations.{engine}:register"']


@pytest.mark.parametrize("engine", ENGINES)
def test_on_by_default(bare_folder, engine):
    out, lines = run(bare_folder, engine, "normal")
    assert out["first"] is True and out["second"] is True
    assert out["heavy_at_import"] == []
    assert out["class"] == "smg_fast.hf.Qwen2VLImageProcessorPil"  # no torchvision here
    assert len(lines) == 1 and "smg_fast.hf.Qwen2VLImageProcessorPil" in lines[0]
    assert out["one_block"] is True  # large images are then read where Pillow keeps them
    assert "large Pillow images kept in one block" in lines[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_pillow_blocks_left_alone_with_the_env_var(bare_folder, engine):
    out, lines = run(bare_folder, engine, "normal", SMG_FAST_PILLOW_ONE_BLOCK="0")
    assert out["first"] is True and out["one_block"] is False
    assert "Pillow's image blocks left as they are" in lines[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_off_with_the_env_var(bare_folder, engine):
    out, lines = run(bare_folder, engine, "normal", **{ENGINES[engine][1]: "0"})
    assert out["first"] is False and out["class"].startswith("transformers.")
    assert len(lines) == 1 and f"{ENGINES[engine][1]}=0" in lines[0]
    assert out["one_block"] is False


@pytest.mark.parametrize("engine", ENGINES)
def test_a_broken_native_module_keeps_transformers(bare_folder, engine):
    out, lines = run(bare_folder, engine, "no-native")
    assert out["first"] is False and out["class"].startswith("transformers.")
    assert len(lines) == 1 and "native module smg_fast._native does not load" in lines[0]


def test_check_engine_reports_what_is_installed_and_resolved():
    from importlib import metadata

    src = str(Path(smg_fast.__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, "-m", "smg_fast", "--check-engine"], text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": src, "SMG_FAST_SGLANG": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 3 and "PyTorch was not found" not in proc.stdout + proc.stderr
    for line, (engine, group) in zip(lines, (("vLLM", "vllm.general_plugins"),
                                             ("SGLang", "sglang.srt.plugins")), strict=False):
        installed = any(ep.name == "smg_fast" for ep in metadata.entry_points(group=group))
        assert line.startswith(f"{engine} plug-in: entry point "
                               f"{'installed' if installed else 'NOT installed'}"), line
    assert "; on;" in lines[0] and "off (SMG_FAST_SGLANG=0)" in lines[1]
    if "NOT installed" not in lines[0]:
        assert lines[0].endswith("; request JPEGs decoded by smg-fast (media connector "
                                 "'smg_fast' in place of vLLM default 'http')"), lines[0]
    assert lines[2].endswith("returns smg_fast.hf.Qwen2VLImageProcessorPil for a Qwen2-VL "
                             "folder (backend 'pil')")  # no torchvision here


def test_vllm_line_waits_for_logging_configured_after_the_plugin(bare_folder):
    """The INFO line is not lost when the engine configures logging only after loading its plug-ins.

    It is written when the image processor is first loaded."""
    out, lines = run(bare_folder, "vllm", "late-logging")
    assert out["first"] is True and out["class"].startswith("smg_fast.hf.Qwen2VLImageProcessor")
    info = [ln for ln in lines if "installed in vLLM for model types" in ln]
    assert len(info) == 1 and f"{out['class']}; " in info[0], lines
