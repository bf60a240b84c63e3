#!/usr/bin/env bash
# The reference virtualenvs the tests run outside the main environment, each made (or found
# ready) by .ci/oracle_venv.sh outside the clone, keyed by its pin file in .ci/venvs/:
#   torchvision  transformers' torchvision image processors (CUDA torch + torchvision, ~4 GB)
#   vllm         vLLM 0.33.0's own request rendering, for the vLLM plug-in tests (~8.5 GB)
#   sglang       SGLang 0.5.23's own multimodal processing and Rust path (~10 GB)
# Cold, from the local package mirror on the 2-core machine: about 3, 4 and 7 minutes; warm:
# a second each. Idempotent; run before the tests (the README's second command, .ci/run).
set -euo pipefail
cd "$(dirname "$0")"
bash ./torchvision_env.sh >/dev/null
for name in vllm sglang; do
    bash ./oracle_venv.sh "$name" >/dev/null
done
echo "reference venvs ready (torchvision, vllm, sglang)"
