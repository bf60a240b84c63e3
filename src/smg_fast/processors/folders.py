"""Model folders: hub ids (cached or downloaded), a folder's JSON, the backend it resolves to.

A hub id is found in huggingface_hub's local cache or downloaded as transformers would; the
backend is the one transformers' Auto classes pick for a folder (what an engine running it
computes)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

# "org/name" as the hub spells repository ids (no leading dot, one slash).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_FILES = ["preprocessor_config.json", "config.json"]
# transformers 5's save format: one processor_config.json holding each part's dict under its
# key; its Auto classes read that nested dict first, the legacy per-part file otherwise.
PROCESSOR_FILE = "processor_config.json"


def is_hub_id(name: str) -> bool:
    """Whether name reads as a hub id ("org/name") and is not a path here."""
    return bool(_HUB_ID.match(name)) and not os.path.exists(name)


def hub_folder(repo_id: str) -> str:
    """The snapshot folder of a hub model id: from the local cache, else downloaded when allowed.

    As transformers does: online, huggingface_hub's download (its endpoint, token and cache
    settings), which reuses the cached copy while the hub's is the same and falls back to it when
    the hub is unreachable; with HF_HUB_OFFLINE set, the local cache alone. Only
    processor_config.json, preprocessor_config.json and config.json (those the repository has; at
    least one of the first two) are fetched.
    ValueError saying what to do when neither works or huggingface_hub is not installed."""
    try:
        from huggingface_hub import constants
    except ImportError:
        raise ValueError(f"{repo_id!r} is not a folder here, and huggingface_hub (which finds hub "
                         "ids in its cache and downloads them) is not installed: pip install "
                         "huggingface_hub, or pass a model folder") from None
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    where = cache_dir or "the default Hugging Face cache"
    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in (
            "1", "ON", "YES", "TRUE"):  # huggingface_hub reads it once, at its import
        try:
            return _snapshot(repo_id, cache_dir, local_only=True)
        except Exception as exc:  # huggingface_hub's not-cached errors
            raise ValueError(
                f"{repo_id!r} is not in the local Hugging Face cache ({where}) and HF_HUB_OFFLINE "
                f"is set: download it where the hub is reachable (huggingface-cli download "
                f"{repo_id} {' '.join(_FILES)}) or pass a model folder ({type(exc).__name__})") \
                from None
    try:  # online, the hub is asked whether the cached copy is current (the cache when unreachable)
        return _snapshot(repo_id, cache_dir, local_only=False)
    except Exception as exc:  # authentication, unknown repository or file, no cache to fall back on
        raise ValueError(
            f"{repo_id!r} could not be read from {constants.ENDPOINT} nor the local Hugging Face "
            f"cache ({where}): fetching its {_FILES[0]} failed ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())}); "
            "pass a model folder, or set HF_TOKEN / HF_ENDPOINT as huggingface_hub needs") \
            from None


def _snapshot(repo_id: str, cache_dir: str | None, *, local_only: bool) -> str:
    """The snapshot folder holding the repository's image processor settings (and config.json).

    preprocessor_config.json or processor_config.json must be there (either may be missing
    alone); config.json is optional."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    def fetch(name: str) -> str | None:
        try:
            path: str = hf_hub_download(repo_id, name, cache_dir=cache_dir,
                                        local_files_only=local_only)
            return path
        except (EntryNotFoundError, LocalEntryNotFoundError):
            return None

    nested = fetch(PROCESSOR_FILE)
    if nested is None:  # the legacy file alone: its own not-found error says what is missing
        pre = hf_hub_download(repo_id, _FILES[0], cache_dir=cache_dir, local_files_only=local_only)
    else:
        pre = fetch(_FILES[0]) or nested
    fetch(_FILES[1])  # a folder without config.json is read from its processor settings alone
    return os.path.dirname(pre)


def nested_fields(folder: str, part: str) -> dict[str, Any] | None:
    """processor_config.json's nested settings of ``part`` ("image_processor", ...), if any.

    None when the folder has no such file or the file no such key; ValueError when the key does
    not hold a JSON object."""
    path = os.path.join(folder, PROCESSOR_FILE)
    if not os.path.isfile(path):
        return None
    nested = read_json(path).get(part)
    if nested is not None and not isinstance(nested, dict):
        raise ValueError(f"{path}: {part} is not a JSON object")
    return nested


def image_processor_fields(folder: str) -> dict[str, Any]:
    """The image processor's settings of a model folder, found as transformers finds them.

    As transformers' AutoImageProcessor: processor_config.json's nested ``image_processor``
    object when it has one, else preprocessor_config.json. ValueError when neither gives one."""
    nested = nested_fields(folder, "image_processor")
    if nested is not None:
        return nested
    pre_path = os.path.join(folder, _FILES[0])
    if not os.path.isfile(pre_path):
        raise ValueError(f"model folder {folder!r} has no preprocessor_config.json nor an "
                         f"image_processor object in {PROCESSOR_FILE}")
    return read_json(pre_path)


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

    do_rescale: false is a rescale factor of 1; do_normalize: false is the do_normalize field."""
    if pre.get("do_resize") is False:
        raise ValueError("do_resize=False is not supported")
    out: dict[str, Any] = {}
    if pre.get("do_rescale") is False:
        out["rescale_factor"] = 1.0
    if pre.get("do_normalize") is False:
        out["do_normalize"] = False
    return out


__all__ = ["PROCESSOR_FILE", "auto_backend", "flag_fields", "hub_folder", "image_processor_fields",
           "is_hub_id", "nested_fields", "read_json"]
