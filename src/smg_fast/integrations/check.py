"""``python -m smg_fast --check-engine``.

Whether the engine plug-ins are installed and on here, and which image processor class transformers'
AutoImageProcessor returns for a Qwen2-VL model folder once smg-fast is registered (what vLLM and
SGLang then run)."""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path

from . import vllm_media
from ._install import enabled

PLUGINS = (("vLLM", "vllm", "vllm.general_plugins", "SMG_FAST_VLLM"),
           ("SGLang", "sglang", "sglang.srt.plugins", "SMG_FAST_SGLANG"))
# Qwen2-VL-7B-Instruct's published preprocessor values.
_QWEN2 = {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
          "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
          "image_mean": [0.48145466, 0.4578275, 0.40821073],
          "image_std": [0.26862954, 0.26130258, 0.27577711]}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def plugin_lines() -> list[str]:
    """One line per engine: installed here, entry point present, on or off."""
    lines = []
    for engine, dist, group, env in PLUGINS:
        points = [ep for ep in metadata.entry_points(group=group) if ep.name == "smg_fast"]
        version = _version(dist)
        state = (f"entry point installed ({points[0].value})" if points else
                 "entry point NOT installed (pip install smg-fast into this environment)")
        switch = "on" if enabled(env) else f"off ({env}=0)"
        line = f"{engine} plug-in: {state}; {switch}; {engine} {version or 'not installed here'}"
        if dist == "vllm" and points and enabled(env):
            line += f"; request JPEGs decoded by {_vllm_decoder()}"
        lines.append(line)
    return lines


def _vllm_decoder() -> str:
    """Who decodes the images of a vLLM request once the plug-in runs, and why."""
    chosen = os.environ.get("VLLM_MEDIA_CONNECTOR")
    if chosen not in (None, vllm_media.NAME):
        return f"vLLM (VLLM_MEDIA_CONNECTOR={chosen})"
    if chosen is None and not enabled(vllm_media.ENV):
        return f"vLLM ({vllm_media.ENV}=0)"
    return (f"smg-fast (media connector {vllm_media.NAME!r}"
            f"{'' if chosen else ' in place of vLLM default ' + repr(vllm_media.DEFAULT)})")


def resolved_line() -> str:
    """The class AutoImageProcessor returns for a Qwen2-VL folder after smg_fast.hf.register()."""
    if importlib.util.find_spec("transformers") is None:
        return "transformers: not installed here (the engines install it)"
    from transformers import AutoImageProcessor

    from .. import hf

    hf.register()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "preprocessor_config.json").write_text(json.dumps(_QWEN2))
        (Path(tmp) / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
        proc = AutoImageProcessor.from_pretrained(tmp)
    cls = type(proc)
    return (f"transformers {_version('transformers')}: AutoImageProcessor returns "
            f"{cls.__module__}.{cls.__name__} for a Qwen2-VL folder "
            f"(backend {getattr(proc, 'backend', '?')!r})")


__all__ = ["plugin_lines", "resolved_line"]
