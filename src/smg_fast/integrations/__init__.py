"""Engine plug-ins.

VLLM (vllm.py) and SGLang (sglang.py), loaded through the entry points named in pyproject.toml."""
