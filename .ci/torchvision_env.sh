#!/usr/bin/env bash
# The torchvision oracle's own virtualenv: transformers' torchvision image processors need
# torchvision, whose wheels need the CUDA build of torch (~6 GB; about 3.5 minutes from the local
# mirror), which must never enter the main environment (it pins the CPU torch 2.13.0). The
# parity tests run their reference script under this venv's python. Idempotent: an existing venv
# with the pinned versions is kept.
#
# Location: SMG_FAST_TV_PYTHON (the venv's python; the tests read the same variable), default
# .venv-tv/bin/python in the repository root (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

TV_PYTHON="${SMG_FAST_TV_PYTHON:-$PWD/.venv-tv/bin/python}"
VENV="$(dirname "$(dirname "$TV_PYTHON")")"
PINS=(torch==2.14.1 torchvision==0.29.1 transformers==5.24.0 pillow==13.0.0 numpy==2.4.6)

if [ -x "$TV_PYTHON" ] && "$TV_PYTHON" - <<'PY' 2>/dev/null
import PIL, numpy, torch, torchvision, transformers
ok = (torch.__version__.split("+")[0], torchvision.__version__.split("+")[0],
      transformers.__version__, PIL.__version__, numpy.__version__) == (
      "2.14.1", "0.29.1", "5.24.0", "13.0.0", "2.4.6")
raise SystemExit(0 if ok else 1)
PY
then
    echo "torchvision oracle env ready: $TV_PYTHON"
    exit 0
fi

# Never "repair" an existing non-venv directory (SMG_FAST_TV_PYTHON=/usr/bin/python3 -> /usr).
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
    echo "error: $VENV exists and is not a virtualenv; point SMG_FAST_TV_PYTHON elsewhere" >&2
    exit 1
fi
start=$(date +%s)
python -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install --no-cache-dir "${PINS[@]}"
echo "torchvision oracle env installed in $(( $(date +%s) - start )) s: $TV_PYTHON"
