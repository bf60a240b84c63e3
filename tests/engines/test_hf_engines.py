"""smg_fast.hf.register() in an engine's environment: the torchvision oracle venv.

With torchvision installed (tests/support/hf_engine_script.py), AutoImageProcessor /
AutoProcessor on a local model folder with the real Qwen2-VL and Qwen3-VL hub preprocessor
values return smg-fast's classes, and every output (the processor's token ids and grids too)
equals transformers' own classes' on real images, for both backends, including the uint8
patches vLLM's device-normalize mode asks for (do_rescale=False, do_normalize=False) and a call
handed to transformers (do_rescale=True, do_normalize=False on torchvision).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tv_oracle import run_with_smg_fast

SCRIPT = Path(__file__).parents[1] / "support" / "hf_engine_script.py"
IMAGES = ("chelsea", "rocket", "grace_hopper", "logo")  # PNG, JPEG, JPEG, RGBA PNG


@pytest.fixture(scope="module")
def engine_results(real_images, tmp_path_factory) -> dict:
    """{case: true | false | "error text"} from the script, run in the oracle venv."""
    return run_with_smg_fast(SCRIPT, [str(real_images.path(name)) for name in IMAGES],
                             tmp_path_factory.mktemp("smg_fast_only"))


def test_every_case_equals_transformers(engine_results):
    assert len(engine_results) >= 80
    wrong = {k: v for k, v in engine_results.items() if v is not True}
    assert not wrong, wrong


@pytest.mark.parametrize("model", ["qwen2_vl", "qwen3_vl"])
def test_the_engine_path_is_smg_fast(engine_results, model):
    for case in ("auto_class", "auto_pil_class", "processor_class", "processor_call",
                 "uint8_dtype", f"{IMAGES[1]}.jpg/torchvision/do_rescale=False+do_normalize=False"):
        key = f"{model}/{case}"
        assert engine_results.get(key) is True, (key, engine_results.get(key))
