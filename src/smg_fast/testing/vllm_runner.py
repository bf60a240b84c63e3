"""Runs vLLM's own request rendering on CPU, as its API server does, inside vLLM's venv.

The rendering is the chat template, tokenization and multimodal processor. Run as ``python
.../smg_fast/testing/vllm_runner.py JOBDIR`` (by path: it imports nothing from smg_fast, so it also
runs where smg_fast cannot load).

JOBDIR/job.pkl holds ``{"folder", "runs": [{"folder" (optional: this run's model folder in place
of the job's), "engine": EngineArgs overrides, "requests": [{"images": [("jpeg", bytes) | ("pil",
PIL.Image)], "videos": [("mp4", bytes)], "text", "mm_processor_kwargs", "timed": [images,
...]}]}]}``. Writes JOBDIR/result.pkl: per run the image and video processor classes vLLM built,
how many video processor instances smg-fast computed calls for, and the media connector class it
fetched images with, and per request the prompt token ids, the image and video processor classes
vLLM built for its mm_processor_kwargs, each multimodal field (images' then videos') as numpy
arrays (bfloat16 as its uint16 bits) and, for each of ``timed`` (other images in the same request
shape: vLLM keeps a processor-only cache even when its multimodal cache is skipped, so a repeated
image would be a cache hit), the render's seconds (wall and this process's CPU, all threads).
Used by the engine tests and bench/engines.py; it never starts vLLM's engine core (no GPU needed).
"""

from __future__ import annotations

import base64
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _content(images: list[tuple[str, Any]], text: str,
             videos: list[tuple[str, bytes]] = ()) -> list[dict[str, Any]]:
    """An OpenAI-style user message.

    JPEG bytes and MP4 bytes as data: URLs, PIL images as image_pil parts."""
    parts: list[dict[str, Any]] = []
    for kind, value in videos:
        if kind != "mp4":
            raise ValueError(f"unknown video kind {kind!r}")
        url = "data:video/mp4;base64," + base64.b64encode(value).decode()
        parts.append({"type": "video_url", "video_url": {"url": url}})
    for kind, value in images:
        if kind == "jpeg":
            url = "data:image/jpeg;base64," + base64.b64encode(value).decode()
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "pil":
            parts.append({"type": "image_pil", "image_pil": value})
        else:
            raise ValueError(f"unknown image kind {kind!r}")
    parts.append({"type": "text", "text": text})
    return [{"role": "user", "content": parts}]


def _as_numpy(value: Any) -> np.ndarray:
    """A torch tensor's exact contents (bfloat16 as its uint16 bits); a list as an array."""
    import torch

    if not isinstance(value, torch.Tensor):  # Qwen3-VL's per-video timestamps
        return np.asarray(value)
    if value.dtype == torch.bfloat16:
        return value.contiguous().view(torch.uint16).numpy().copy()
    return value.numpy().copy()


def _fields(prompt: dict[str, Any]) -> dict[str, list[np.ndarray]]:
    """Each multimodal field of an engine prompt, one array per image or video, in order."""
    out: dict[str, list[np.ndarray]] = {}
    for modality in ("image", "video"):
        for item in prompt["mm_kwargs"].get(modality, []):
            for key, value in item.get_data().items():
                out.setdefault(key, []).append(_as_numpy(value))
    return out


def _processor_class(renderer: Any, mm_kwargs: dict[str, Any], part: str) -> str | None:
    """The class of the HF processor's part (image_processor, video_processor) vLLM builds."""
    hf = renderer.get_mm_processor().info.get_hf_processor(**mm_kwargs)
    if getattr(hf, part, None) is None:
        return None
    cls = type(getattr(hf, part))
    return f"{cls.__module__}.{cls.__qualname__}"


def _smg_fast_video_instances() -> int:
    """How many video processor instances smg-fast computed a call for (0 if none, or not loaded).

    Read from smg_fast.hf_video when the plug-in imported it; nothing is imported here."""
    module = sys.modules.get("smg_fast.hf_video")
    return len(getattr(module, "_processors", {})) if module is not None else 0


def _image_processor(renderer: Any, mm_kwargs: dict[str, Any]) -> str | None:
    """The class of the image processor vLLM builds for a request's mm_processor_kwargs."""
    return _processor_class(renderer, mm_kwargs, "image_processor")


def _render_run(folder: str, run: dict[str, Any]) -> dict[str, Any]:
    """One engine configuration: its renderer, each request rendered once (kept), then timed."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.renderers.params import ChatParams
    from vllm.renderers.registry import renderer_from_config

    args = EngineArgs(**{"model": folder, "max_model_len": 32768, "enforce_eager": True,
                         "limit_mm_per_prompt": {"image": 8}, **run.get("engine", {})})
    renderer = renderer_from_config(args.create_engine_config())
    results = []
    for req in run["requests"]:
        conv = _content(req.get("images", []), req.get("text", "Describe these images."),
                        req.get("videos", []))
        mm_kwargs = req.get("mm_processor_kwargs")
        params = ChatParams(mm_processor_kwargs=mm_kwargs)
        # the API server hands a request's mm_processor_kwargs to the processor as a prompt
        # extra; ChatParams' copy is only for parsing the messages
        extras = None if mm_kwargs is None else {"mm_processor_kwargs": mm_kwargs}
        _, prompts = renderer.render_chat([conv], params, prompt_extras=extras,
                                          skip_mm_cache=True)
        wall, cpu = [], []
        for images in req.get("timed", []):
            timed = _content(images, req.get("text", "Describe these images."))
            t0, c0 = time.perf_counter(), time.process_time()
            renderer.render_chat([timed], params, prompt_extras=extras, skip_mm_cache=True)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        results.append({"prompt_token_ids": list(prompts[0]["prompt_token_ids"]),
                        "fields": _fields(prompts[0]), "wall": wall, "cpu": cpu,
                        "image_processor": _image_processor(renderer, mm_kwargs or {}),
                        "video_processor": _processor_class(renderer, mm_kwargs or {},
                                                            "video_processor")})
    image_processor = _image_processor(renderer, {})
    import vllm.envs as envs
    from vllm.multimodal.media.connector import MEDIA_CONNECTOR_REGISTRY

    connector = MEDIA_CONNECTOR_REGISTRY.name2class[envs.VLLM_MEDIA_CONNECTOR]
    return {"requests": results, "image_processor": image_processor,
            "video_processor": _processor_class(renderer, {}, "video_processor"),
            "smg_fast_video_instances": _smg_fast_video_instances(),
            "media_connector": f"{connector.__module__}.{connector.__qualname__}"}


def main(jobdir: Path) -> None:
    """Renders every run of the job; one thread, as vLLM's API server renders a request."""
    job = pickle.loads((jobdir / "job.pkl").read_bytes())
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import torch
    from vllm.config.logging import LoggingConfig
    from vllm.logger import configure_logging

    configure_logging(LoggingConfig())  # the API server's first step, before any plug-in loads
    torch.set_num_threads(1)
    runs = [_render_run(run.get("folder", job["folder"]), run) for run in job["runs"]]
    (jobdir / "result.pkl").write_bytes(pickle.dumps({"runs": runs}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
