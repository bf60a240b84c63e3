"""Runs SGLang's own multimodal request processing on CPU, as its TokenizerManager does.

It runs inside SGLang's venv: ``python -m smg_fast.testing.sglang_runner JOBDIR``.

JOBDIR/job.pkl holds ``{"folder", "runs": [{"mode", "folder", "server": ServerArgs overrides,
"requests": [{"images": [("jpeg", bytes) | ("pil", PIL.Image)], "videos": [("frames", uint8 array T
x H x W x 3)], "text"}]}], "repeat": timed rounds}``. Mode "sglang" (the default) loads SGLang's
plug-ins, publishes its server arguments, builds transformers' processor with SGLang's
``get_processor`` and its multimodal processor with ``get_mm_processor`` (what
``TokenizerManager.init_tokenizer_and_processor`` does), renders the prompt with the model's chat
template and awaits ``process_mm_data_async`` with the images as SGLang receives them (JPEG bytes as
data: URLs, PIL images as they are) and the videos as decoded frames (SGLang's ``load_video`` passes
arrays through; its decoders, torchcodec or decord, are not needed). Mode "rust" runs SGLang's
native Rust path, ``_multimodal.qwen_vl.preprocess(jpeg_bytes, spec_json)``, loaded by file path,
each JPEG with the parameters SGLang's Rust server would resolve from the same processor. Mode
"transformers" (a reference, untimed) calls the image processor SGLang built on each JPEG as Pillow
decodes it. Writes JOBDIR/result.pkl: per run the image processor class SGLang built (its video
processor class, how many video processor instances smg-fast computed calls for) and per request the
prompt token ids, each field as numpy arrays (one per image or video: images' pixel_values, videos'
pixel_values_videos) and the timed rounds' seconds (wall and this process's CPU, which counts the
Rust path's own threads). No GPU, scheduler or model.
"""

from __future__ import annotations

import asyncio
import base64
import glob
import importlib.util
import io
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _image_data(images: list[tuple[str, Any]]) -> list[Any]:
    """Images as a request carries them to SGLang: JPEG bytes as data: URLs, PIL images."""
    out: list[Any] = []
    for kind, value in images:
        if kind == "jpeg":
            out.append("data:image/jpeg;base64," + base64.b64encode(value).decode())
        elif kind == "pil":
            out.append(value)
        else:
            raise ValueError(f"unknown image kind {kind!r}")
    return out


def _video_data(kind: str, value: Any) -> Any:
    """A video as a request carries it to SGLang: MP4 bytes as a data: URL, or decoded frames."""
    if kind == "mp4":
        return "data:video/mp4;base64," + base64.b64encode(value).decode()
    if kind != "frames":
        raise ValueError(f"unknown video kind {kind!r}")
    return value


def _use_decoded(decoded: dict[str, tuple[np.ndarray, float]]) -> None:
    """SGLang's video decoder serves frames decoded beforehand, keyed by the video's sha256.

    For hosts where SGLang's own decoders cannot run (torchcodec without FFmpeg's libraries, no
    decord): SGLang's ``load_video`` builds this subclass of its ``VideoDecoderWrapper`` instead,
    and everything after (its frame sampling, its resize, the processor call) is SGLang's. A
    video not in the table raises. SGLang's Qwen-VL video code also pins the frames' memory
    unless its CPU engine runs (SGLANG_USE_CPU_ENGINE, which needs sgl-kernel's CPU build): on a
    host without a GPU that call fails, so that module is told it runs on the CPU (pinning
    copies the frames, changing no value)."""
    import hashlib

    import torch
    from sglang.srt.multimodal.processors import qwen_vl
    from sglang.srt.utils import common
    from sglang.srt.utils.video_decoder import VideoDecoderWrapper

    class DecodedVideo(VideoDecoderWrapper):
        """SGLang's decoder interface over frames decoded beforehand (T x H x W x 3 uint8)."""

        def __init__(self, source: Any, device: str = "cpu", num_decode_threads: int = 0):
            if not isinstance(source, bytes):
                raise ValueError(f"the runner serves videos given as bytes, not {source!r}")
            key = hashlib.sha256(source).hexdigest()
            if key not in decoded:
                raise ValueError(f"no decoded frames for the video {key}")
            self._frames, self._fps = decoded[key]
            self._source_bytes, self._source_path, self._tmp_path = source, None, None

        def __len__(self) -> int:
            return len(self._frames)

        def __getitem__(self, idx: Any) -> Any:
            return self._frames[idx]

        @property
        def avg_fps(self) -> float:
            return self._fps

        @property
        def frame_shape(self) -> tuple[int, int]:
            return int(self._frames.shape[1]), int(self._frames.shape[2])

        def get_frames_at(self, indices: list) -> Any:
            return self._frames[list(indices)]

        def get_frames_as_tensor(self, indices: list) -> Any:
            return torch.from_numpy(self._frames[list(indices)].copy())

    common.VideoDecoderWrapper = DecodedVideo
    if not torch.cuda.is_available():
        qwen_vl.is_cpu = lambda: True


def _prompt(processor: Any, n_images: int, text: str, n_videos: int = 0) -> str:
    """The model's chat template applied to one user message with n images, n videos and text."""
    content = ([{"type": "image"}] * n_images + [{"type": "video"}] * n_videos
               + [{"type": "text", "text": text}])
    return processor.apply_chat_template([{"role": "user", "content": content}],
                                         tokenize=False, add_generation_prompt=True)


def _as_numpy(value: Any) -> np.ndarray:
    """A tensor's exact contents (bfloat16 as its uint16 bits)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bfloat16:
            return value.contiguous().view(torch.uint16).numpy().copy()
        return value.detach().cpu().numpy().copy()
    return np.asarray(value).copy()


def _fields(output: Any) -> dict[str, list[np.ndarray]]:
    """Each item's features (pixel_values or pixel_values_videos) and its other fields, in order."""
    out: dict[str, list[np.ndarray]] = {}
    for item in output.mm_items:
        if item.feature is not None:
            key = "pixel_values_videos" if item.is_video() else "pixel_values"
            out.setdefault(key, []).append(_as_numpy(item.feature))
        for key, value in (item.model_specific_data or {}).items():
            out.setdefault(key, []).append(_as_numpy(value))
    return out


class _Engine:
    """SGLang's tokenizer-side state for one configuration: processor and mm processor."""

    def __init__(self, folder: str, server: dict[str, Any]) -> None:
        from sglang.srt.plugins import load_plugins

        load_plugins()  # first, as SGLang's engine does: its hooks patch what follows
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.managers import multimodal_processor as mmp
        from sglang.srt.managers.tokenizer_manager import get_processor_wrapper
        from sglang.srt.multimodal.transport import determine_tensor_transport_mode
        from sglang.srt.runtime_context import publish
        from sglang.srt.server_args import ServerArgs
        from sglang.srt.utils import configure_logger

        args = ServerArgs(model_path=folder, device="cpu", **server)
        configure_logger(args)
        publish(args, role="tokenizer")
        self.model_config = ModelConfig.from_server_args(args)
        mmp.import_processors("sglang.srt.multimodal.processors")
        self.processor = get_processor_wrapper()
        self.mm = mmp.get_mm_processor(self.model_config.hf_config, args, self.processor,
                                       determine_tensor_transport_mode(),
                                       model_config=self.model_config)

    async def process(self, req: dict[str, Any]) -> Any:
        """One request through the multimodal processor, as TokenizerManager calls it."""
        from sglang.srt.managers.io_struct import GenerateReqInput

        videos = [_video_data(kind, value) for kind, value in req.get("videos", [])]
        text = _prompt(self.processor, len(req["images"]), req.get("text", "Describe."),
                       len(videos))
        obj = GenerateReqInput(text=text, image_data=_image_data(req["images"]) or None,
                               video_data=videos or None)
        return await self.mm.process_mm_data_async(image_data=obj.image_data, input_text=text,
                                                   request_obj=obj, max_req_input_len=32768)

    def rust_spec(self) -> str:
        """The Rust path's parameters, resolved from SGLang's processor.

        Resolved as SGLang's Rust server resolves them (torchvision class: "aten_u8" resize, PIL
        class: "pil")."""
        ip = self.processor.image_processor
        size = getattr(ip, "size", None) or {}
        spec = {"family": "qwen_vl", "feature_shm": False,
                "image_token_id": self.model_config.hf_config.image_token_id,
                "patch_size": ip.patch_size, "merge_size": ip.merge_size,
                "temporal_patch_size": ip.temporal_patch_size,
                "min_pixels": int(getattr(ip, "min_pixels", None) or size["shortest_edge"]),
                "max_pixels": int(getattr(ip, "max_pixels", None) or size["longest_edge"]),
                "image_mean": [float(x) for x in ip.image_mean],
                "image_std": [float(x) for x in ip.image_std],
                "resample": "pil" if type(ip).__name__.endswith("Pil") else "aten_u8"}
        return json.dumps(spec)


def rust_module() -> Any:
    """SGLang's ``_multimodal`` extension, loaded from its file (no SGLang import)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sglang is not installed in this environment")
    root = Path(list(spec.submodule_search_locations)[0])
    found = glob.glob(str(root / "srt" / "rust_extensions" / "_multimodal*.so"))
    if not found:
        raise RuntimeError(f"no _multimodal extension under {root}")
    ext = importlib.util.spec_from_file_location("_multimodal", found[0])
    module = importlib.util.module_from_spec(ext)
    ext.loader.exec_module(module)
    return module


def _rust_request(rust: Any, spec: str, req: dict[str, Any]) -> dict[str, list[np.ndarray]]:
    """Each JPEG of a request through the Rust path: pixel_values (n, d) and grid (1, 3)."""
    out: dict[str, list[np.ndarray]] = {"pixel_values": [], "image_grid_thw": []}
    for kind, value in req["images"]:
        if kind != "jpeg":
            raise ValueError("the Rust path takes encoded bytes only")
        flat, grid = rust.qwen_vl.preprocess(value, spec)
        pixels = np.asarray(flat, dtype=np.float32)
        out["pixel_values"].append(pixels.reshape(int(np.prod(grid)), -1))
        out["image_grid_thw"].append(np.asarray([grid], dtype=np.int64))
    return out


def _reference_request(engine: _Engine, req: dict[str, Any]) -> dict[str, list[np.ndarray]]:
    """The reference outputs of a request, from the image processor SGLang built.

    Each JPEG decoded by Pillow and computed by that processor, called directly (transformers' class
    when the plug-in is off)."""
    from PIL import Image

    out: dict[str, list[np.ndarray]] = {"pixel_values": [], "image_grid_thw": []}
    for kind, value in req["images"]:
        if kind != "jpeg":
            raise ValueError("the reference mode takes encoded bytes only")
        with Image.open(io.BytesIO(value)) as im:
            rgb = im.convert("RGB")
        got = engine.processor.image_processor(images=[rgb], return_tensors="pt")
        out["pixel_values"].append(_as_numpy(got["pixel_values"]))
        out["image_grid_thw"].append(_as_numpy(got["image_grid_thw"]))
    return out


def _timed(fn: Any, repeat: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def _smg_fast_video_instances() -> int:
    """How many video processor instances smg-fast computed a call for (0 if none, or not loaded).

    Read from smg_fast.hf_video when the plug-in imported it; nothing is imported here."""
    module = sys.modules.get("smg_fast.hf_video")
    return len(getattr(module, "_processors", {})) if module is not None else 0


def _run(engine: _Engine, run: dict[str, Any], repeat: int) -> dict[str, Any]:
    """One configuration: each request processed once (kept), then timed."""
    loop = asyncio.new_event_loop()
    results = []
    rust = rust_module() if run.get("mode") == "rust" else None
    spec = engine.rust_spec() if rust is not None else ""
    for req in run["requests"]:
        if run.get("mode") == "transformers":
            results.append({"prompt_token_ids": [], "fields": _reference_request(engine, req)})
            wall, cpu = [], []
        elif rust is not None:
            results.append({"prompt_token_ids": [], "fields": _rust_request(rust, spec, req)})
            wall, cpu = _timed(lambda r=req: _rust_request(rust, spec, r), repeat)
        else:
            output = loop.run_until_complete(engine.process(req))
            results.append({"prompt_token_ids": list(output.input_ids),
                            "fields": _fields(output)})
            wall, cpu = _timed(lambda r=req: loop.run_until_complete(engine.process(r)),
                               repeat)
        results[-1].update(wall=wall, cpu=cpu)
    loop.close()
    ip = type(engine.processor.image_processor)
    vp = getattr(engine.processor, "video_processor", None)
    return {"requests": results, "spec": spec,
            "image_processor": f"{ip.__module__}.{ip.__qualname__}",
            "video_processor": None if vp is None else
            f"{type(vp).__module__}.{type(vp).__qualname__}",
            "smg_fast_video_instances": _smg_fast_video_instances()}


def main(jobdir: Path) -> None:
    """Processes every run of the job on one thread, as SGLang's tokenizer process would."""
    job = pickle.loads((jobdir / "job.pkl").read_bytes())
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    if job.get("decoded"):
        _use_decoded(job["decoded"])
    runs, engines = [], {}
    for run in job["runs"]:
        folder = run.get("folder", job["folder"])
        key = json.dumps([folder, run.get("server", {})], sort_keys=True)
        if key not in engines:
            engines[key] = _Engine(folder, run.get("server", {}))
        runs.append(_run(engines[key], run, job.get("repeat", 0)))
    (jobdir / "result.pkl").write_bytes(pickle.dumps({"runs": runs}))


if __name__ == "__main__":
    main(Path(sys.argv[-1]))
