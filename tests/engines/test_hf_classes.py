"""smg_fast.hf's classes against transformers' own, run in the torchvision oracle venv
(tests/support/hf_call_script.py): the torchvision and PIL Qwen classes and Kimi's torchvision
class on every input kind and call-time option, and inside Qwen2VLProcessor with a tiny offline
tokenizer (transformers' Qwen2VLProcessor needs a video processor, which needs torchvision: the main
environment cannot build one)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.tv_oracle import tv_python

import smg_fast

SCRIPT = Path(__file__).parents[1] / "support" / "hf_call_script.py"


@pytest.fixture(scope="module")
def results(real_images, tmp_path_factory):
    # The oracle venv imports the smg_fast this process imported (installed by pip in CI, or
    # built in place), through a folder holding only that package: putting its parent on
    # PYTHONPATH would shadow the venv's own numpy with the main environment's.
    only = tmp_path_factory.mktemp("smg_fast_only")
    (only / "smg_fast").symlink_to(Path(smg_fast.__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=str(only))
    proc = subprocess.run([tv_python(), str(SCRIPT), str(real_images.path("chelsea"))],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_case_equals_transformers(results):
    assert len(results) >= 50
    wrong = {k: v for k, v in results.items() if v is not True}
    assert not wrong, wrong
    for name in ("torchvision/Qwen2VLProcessor", "pil/Qwen2VLProcessor", "kimi/torchvision",
                 "torchvision/nested", "torchvision/torch_chw", "torchvision/data_url"):
        assert results[name] is True, name


def test_float_images_on_torchvision_go_to_transformers(results):
    """transformers resizes float tensors in float there, which smg-fast does not compute: the
    call is handed to transformers' class, so the result is still its own."""
    assert results["torchvision/float_unit"] is True
