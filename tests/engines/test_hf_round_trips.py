"""smg_fast.hf's classes built with no arguments and round-tripped, as transformers' own are.

Each class constructs with transformers' class defaults and returns what transformers' class
returns for a real photo (np.array_equal), and so does each copy made through to_dict /
from_dict and save_pretrained / from_pretrained, from ours or from transformers' instance. The PIL
classes run here, the torchvision classes in the oracle venv (tests/support/hf_round_trip_script.py
runs both).
"""

from __future__ import annotations

from pathlib import Path

from support.hf_round_trip_script import run
from support.tv_oracle import run_with_smg_fast

import smg_fast.hf as sh

SCRIPT = Path(__file__).parents[1] / "support" / "hf_round_trip_script.py"
STEPS = 7


def _check(results: dict, backend: str) -> None:
    wrong = {k: v for k, v in results.items() if v is not True}
    assert not wrong, wrong
    names = [n for n in sh.__all__ if n != "register" and getattr(sh, n).default_backend == backend]
    assert names and len(results) == STEPS * len(names)


def test_pil_classes(real_images):
    results = run("pil", real_images.rgb_array("chelsea")[:233, :301])
    _check(results, "pil")
    assert results["LlavaNextImageProcessorPil/no_arguments"] is True


def test_torchvision_classes(real_images, tmp_path):
    results = run_with_smg_fast(SCRIPT, ["torchvision", str(real_images.path("chelsea"))],
                                tmp_path)
    _check(results, "torchvision")
    assert results["LlavaNextImageProcessor/no_arguments"] is True

