"""Processors: the ``Family`` registry (the one extension point) and what it serves.

The ``Processor`` and its batches, the config, transformers-style calls, the loader and the
reference builder. Importing this package registers the built-in families (processors/families/)."""

from __future__ import annotations

from . import families  # noqa: F401  (registers the built-in families)
from .batch import PlannedBatch, PreparedBatch
from .config import BACKENDS, ProcessorConfig
from .loader import load_processor, make_processor
from .processor import Processor, ProcessorOutput
from .registry import Family, check_config, get_family, names, register

FAMILIES = names()

__all__ = ["BACKENDS", "FAMILIES", "Family", "PlannedBatch", "PreparedBatch", "Processor",
           "ProcessorConfig", "ProcessorOutput", "check_config", "get_family", "load_processor",
           "make_processor", "names", "register"]
