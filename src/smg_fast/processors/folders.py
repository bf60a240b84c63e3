"""Model folders: a hub id found in huggingface_hub's local cache, and the backend transformers'
Auto classes would pick for a folder (what an engine running it computes)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

# "org/name" as the hub spells repository ids (no leading dot, one slash).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_FILES = ["preprocessor_config.json", "config.json"]


def is_hub_id(name: str) -> bool:
    return bool(_HUB_ID.match(name)) and not os.path.exists(name)


def hub_folder(repo_id: str) -> str:
    """The cached snapshot folder of a hub model id (never downloads); ValueError saying what
    to do when it is not cached or huggingface_hub is not installed."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ValueError(f"{repo_id!r} is not a folder here, and huggingface_hub (which finds hub "
                         "ids in its local cache) is not installed: pass a model folder") from None
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    try:
        return snapshot_download(repo_id, local_files_only=True, allow_patterns=_FILES,
                                 cache_dir=cache_dir)
    except Exception as exc:  # huggingface_hub's not-cached / offline / bad-id errors
        where = cache_dir or "the default Hugging Face cache"
        raise ValueError(
            f"{repo_id!r} is not in the local Hugging Face cache ({where}): download it first "
            f"(huggingface-cli download {repo_id} {' '.join(_FILES)}) or pass a model folder "
            f"({type(exc).__name__})") from None


def _image_processor_type(folder: str) -> tuple[str, bool]:
    """(image_processor_type named by preprocessor_config.json or "", whether it is Kimi's
    media_proc_cfg format)."""
    try:
        with open(os.path.join(folder, "preprocessor_config.json"), encoding="utf-8") as fh:
            pre: Any = json.load(fh)
    except (OSError, ValueError):
        return "", False  # the loader reports it
    if not isinstance(pre, dict):
        return "", False
    return str(pre.get("image_processor_type") or ""), "media_proc_cfg" in pre


def folder_backend(folder: str) -> tuple[str | None, str]:
    """(backend, why) transformers' AutoImageProcessor would resolve for this folder in an
    engine's environment (torchvision installed, as vLLM and SGLang have it); None keeps the
    family's default."""
    kind, kimi = _image_processor_type(folder)
    if kind.endswith("Pil"):
        return "pil", f"preprocessor_config.json names {kind}, transformers' PIL class"
    if kimi or kind.startswith("Kimi"):
        if kind == "Kimi_K25ImageProcessor":
            return "torchvision", f"preprocessor_config.json names {kind} (torchvision)"
        return None, "a Kimi-K2.5 folder without transformers' class: its upstream code"
    named = f"names {kind}" if kind else "names no class"
    return "torchvision", (f"preprocessor_config.json {named}: the torchvision class that "
                           "transformers' AutoImageProcessor returns with torchvision installed "
                           "(what vLLM and SGLang run)")


__all__ = ["folder_backend", "hub_folder", "is_hub_id"]
