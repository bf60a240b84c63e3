"""Processor families and the loader."""

from __future__ import annotations

import os
from typing import Any

from ..config import resolve_config
from .base import Processor, ProcessorOutput
from .kimi import KimiK25Processor
from .qwen import QwenVLProcessor


def load_processor(name_or_dir: str | os.PathLike[str], **overrides: Any) -> Processor:
    """A processor for a built-in family name or a HuggingFace model folder.

    Overrides (e.g. ``min_pixels=..., max_pixels=..., max_image_pixels=...``) win over the
    folder's or family's values.
    """
    cfg = resolve_config(name_or_dir, overrides)
    return QwenVLProcessor(cfg) if cfg.is_qwen else KimiK25Processor(cfg)


__all__ = ["KimiK25Processor", "Processor", "ProcessorOutput", "QwenVLProcessor",
           "load_processor"]
