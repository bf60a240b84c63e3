"""Engine plug-ins: vLLM (vllm.py) and SGLang (sglang.py), loaded through the entry points
named in pyproject.toml."""
