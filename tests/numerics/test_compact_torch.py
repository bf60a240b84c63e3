"""smg_fast.expand with torch (optional here): every family, backend and dtype, in the oracle venv.

tests/support/compact_torch_script.py runs there (torch + torchvision): the compact output with
return_tensors="pt" expands, natively on CPU and by the device gather (and on CUDA when the host
has one), to the full path's tensor, torch.equal."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tv_oracle import run_with_smg_fast

from smg_fast.processors.registry import get_family

SCRIPT = Path(__file__).parents[1] / "support" / "compact_torch_script.py"


@pytest.fixture(scope="module")
def compact_torch_results(real_images, tmp_path_factory) -> dict:
    """{case: true | false | "error text"} from the script, run in the oracle venv."""
    return run_with_smg_fast(SCRIPT, [str(real_images.path("chelsea"))],
                             tmp_path_factory.mktemp("smg_fast_only"))


def test_torch_expand_equals_the_full_path(compact_torch_results):
    import smg_fast

    cases = sum(len(get_family(n).backends) for n in smg_fast.FAMILIES) * 3 * 4
    assert len([k for k in compact_torch_results if not k.endswith("/cuda")]) == cases
    wrong = {k: v for k, v in compact_torch_results.items() if v is not True}
    assert not wrong, wrong
