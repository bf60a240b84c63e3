#!/usr/bin/env bash
# The torchvision oracle's own virtualenv: transformers' torchvision image processors need
# torchvision, whose wheels need the CUDA build of torch (~6 GB; about 3 minutes from the local
# mirror), which must never enter the main environment (it pins the CPU torch 2.13.0). The
# parity tests run their reference script under this venv's python.
#
# .ci/oracle_venv.sh makes it (or finds it ready) outside the clone, keyed by its pin file
# .ci/venvs/torchvision.txt; the tests and bench/torchvision_backend.py find it the same way
# (smg_fast.testing.oracle_venv). SMG_FAST_TV_PYTHON, when set, names the python to use instead.
# Prints that python on stdout.
set -euo pipefail
if [ -n "${SMG_FAST_TV_PYTHON:-}" ]; then
    [ -x "$SMG_FAST_TV_PYTHON" ] || {
        echo "error: SMG_FAST_TV_PYTHON=$SMG_FAST_TV_PYTHON is not an executable python" >&2
        exit 1
    }
    echo "torchvision oracle env: $SMG_FAST_TV_PYTHON (SMG_FAST_TV_PYTHON)" >&2
    echo "$SMG_FAST_TV_PYTHON"
    exit 0
fi
exec "$(dirname "$0")/oracle_venv.sh" torchvision
