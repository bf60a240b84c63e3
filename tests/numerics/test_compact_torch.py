"""smg_fast.expand with torch (optional here): every family, backend and dtype, in the oracle venv.

tests/support/compact_torch_script.py runs there (torch + torchvision): the compact output with
return_tensors="pt" expands, natively on CPU and by the device gather (and on CUDA when the host
has one), to the full path's tensor, torch.equal."""

from __future__ import annotations

from pathlib import Path

from support.tv_oracle import run_with_smg_fast

import smg_fast
from smg_fast.processors.registry import get_family


def test_torch_expand_equals_the_full_path(real_images, tmp_path):
    script = Path(__file__).parents[1] / "support" / "compact_torch_script.py"
    results = run_with_smg_fast(script, [str(real_images.path("chelsea"))], tmp_path)
    per_dtype = 4  # native CPU, into out=, the device gather, a NumPy table with torch codes
    cases = sum((per_dtype if smg_fast.load_processor(n, backend=b).compact_exact else 1) * 3
                for n in smg_fast.FAMILIES for b in get_family(n).backends)  # else: refused
    assert len([k for k in results if not k.endswith("/cuda")]) == cases
    wrong = {k: v for k, v in results.items() if v is not True}
    assert not wrong, wrong
