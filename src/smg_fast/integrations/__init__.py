"""Engine plug-ins: vLLM (vllm.py), loaded through entry points named in pyproject.toml."""
