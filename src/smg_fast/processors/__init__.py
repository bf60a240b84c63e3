"""Processor families, their registry and the loader. Importing this package registers the
built-in families (qwen.py, kimi.py)."""

from __future__ import annotations

# Import order is registration order, the order of FAMILIES: Qwen first (qwen2_vl is the
# default everywhere), then Kimi.
# isort: off
from .processor import Processor, ProcessorOutput
from .qwen import QwenVLProcessor
from .kimi import KimiK25Processor
# isort: on
from .registry import Family, get_family, load_processor, make_processor, names, register

FAMILIES = names()

__all__ = ["FAMILIES", "Family", "KimiK25Processor", "Processor", "ProcessorOutput",
           "QwenVLProcessor", "get_family", "load_processor", "make_processor", "register"]
