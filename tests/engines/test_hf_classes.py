"""smg_fast.hf's classes against transformers' own, run in the torchvision oracle venv.

The script (tests/support/hf_call_script.py) runs the torchvision and PIL Qwen classes and
Kimi's torchvision class on every input kind and call-time option, and inside Qwen2VLProcessor
with a tiny offline tokenizer (transformers' Qwen2VLProcessor needs a video processor, which
needs torchvision: the main environment cannot build one).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tv_oracle import run_with_smg_fast

SCRIPT = Path(__file__).parents[1] / "support" / "hf_call_script.py"


@pytest.fixture(scope="module")
def class_results(real_images, tmp_path_factory) -> dict:
    """{case: true | false | "error text"} from the script, run in the oracle venv."""
    return run_with_smg_fast(SCRIPT, [str(real_images.path("chelsea"))],
                             tmp_path_factory.mktemp("smg_fast_only"))


def test_every_case_equals_transformers(class_results):
    assert len(class_results) >= 50
    wrong = {k: v for k, v in class_results.items() if v is not True}
    assert not wrong, wrong
    for name in ("torchvision/Qwen2VLProcessor", "pil/Qwen2VLProcessor", "kimi/torchvision",
                 "torchvision/nested", "torchvision/torch_chw", "torchvision/data_url"):
        assert class_results[name] is True, name


def test_float_images_on_torchvision_go_to_transformers(class_results):
    """Float tensors on the torchvision class are transformers' own result.

    transformers resizes float tensors in float there, which smg-fast does not compute: the call is
    handed to transformers' class, so the result is still its own.
    """
    assert class_results["torchvision/float_unit"] is True
