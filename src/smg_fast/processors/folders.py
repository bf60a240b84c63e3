"""Model folders: hub ids in the local cache, a folder's JSON, the backend it resolves to.

A hub id is found in huggingface_hub's local cache; the backend is the one transformers' Auto
classes pick for a folder (what an engine running it computes)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

# "org/name" as the hub spells repository ids (no leading dot, one slash).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_FILES = ["preprocessor_config.json", "config.json"]


def is_hub_id(name: str) -> bool:
    """Whether name reads as a hub id ("org/name") and is not a path here."""
    return bool(_HUB_ID.match(name)) and not os.path.exists(name)


def hub_folder(repo_id: str) -> str:
    """The cached snapshot folder of a hub model id (never downloads).

    ValueError saying what to do when it is not cached or huggingface_hub is not installed."""
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


def read_json(path: str) -> dict[str, Any]:
    """The JSON object in path; ValueError naming the file when it cannot be read as one."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def auto_backend(named: str) -> tuple[str | None, str]:
    """(backend, why) transformers' AutoImageProcessor resolves for a folder naming ``named``.

    ``named`` is the class its preprocessor_config.json names ("" for none); the environment is
    an engine's (torchvision installed, as vLLM and SGLang have it): its PIL class when it names
    one, else the torchvision class. A family whose folders resolve otherwise declares its own
    rule (``Family.folder_backend``); None keeps the family's default."""
    if named.endswith("Pil"):
        return "pil", f"preprocessor_config.json names {named}, transformers' PIL class"
    what = f"names {named}" if named else "names no class"
    return "torchvision", (f"preprocessor_config.json {what}: the torchvision class that "
                           "transformers' AutoImageProcessor returns with torchvision installed "
                           "(what vLLM and SGLang run)")


def flag_fields(pre: dict[str, Any]) -> dict[str, Any]:
    """The config fields a preprocessor_config.json's do_* flags set (do_resize: false refused).

    do_rescale: false is a rescale factor of 1; do_normalize: false is mean 0 and std 1."""
    if pre.get("do_resize") is False:
        raise ValueError("do_resize=False is not supported")
    out: dict[str, Any] = {}
    if pre.get("do_rescale") is False:
        out["rescale_factor"] = 1.0
    if pre.get("do_normalize") is False:
        out["image_mean"], out["image_std"] = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    return out


__all__ = ["auto_backend", "flag_fields", "hub_folder", "is_hub_id", "read_json"]
