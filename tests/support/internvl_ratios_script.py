"""vLLM's InternVL candidate grids (get_internvl_target_ratios), in the vLLM venv.

Runs under the venv's python (tests/parity/test_internvl_bounds.py), never under pytest; argv[1]
is a JSON list of [min, max] bounds. Prints one JSON object: {"min,max": [[columns, rows], ...]}.
"""

import json
import sys

from vllm.transformers_utils.processors.internvl import get_internvl_target_ratios

bounds = json.loads(sys.argv[1])
print(json.dumps({f"{lo},{hi}": get_internvl_target_ratios(lo, hi) for lo, hi in bounds}))
