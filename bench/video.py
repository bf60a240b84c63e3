"""Videos: transformers' path against smg-fast against the decoder floor, one thread.

Three H.264 clips made here with PyAV (cached under ~/.cache/smg-fast/bench-videos): 6 s 720p,
60 s 1080p and 10 s 4K (3840x2160), all 30 fps, sampled at 2 fps with Qwen2-VL's video processor
defaults (or --family qwen3_vl). Per clip, CPU seconds (best of --repeats):

- transformers: its PyAV loader (``load_video(..., backend="pyav")`` sampling with the video
  processor's ``sample_frames``) + its video processor on the kept frames, torch on 1 thread, run
  in the torchvision venv (bench/video_reference.py);
- smg-fast: ``load_video_processor(family, do_sample_frames=True, fps=2)`` on the clip's bytes,
  1 native thread, 1 FFmpeg thread (its pixel_values_videos checked equal to transformers');
- floor: PyAV decoding every frame of the clip and nothing else (1 FFmpeg thread);
- processing only: each video processor on the same kept frames, already decoded (transformers'
  from its run, smg-fast's on the frames smg_fast.video.load_video gives).

    PYTHONPATH=src python bench/video.py [--clips 720p,1080p,4k] [--repeats 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from gate import cpu_model

import smg_fast
from smg_fast.processors.loader import load_video_processor
from smg_fast.processors.video_plan import sample_indices
from smg_fast.testing.oracle_venv import torchvision_python
from smg_fast.testing.video_clips import make_clip, texture
from smg_fast.video import load_video

REPO = Path(__file__).resolve().parents[1]
CLIPS = {"720p": (1280, 720, 6), "1080p": (1920, 1080, 60), "4k": (3840, 2160, 10)}
FPS_IN, FPS_OUT = 30, 2


def clip_path(name: str) -> Path:
    """The clip's file, encoded once (x264 preset fast, its default B-frames) and cached."""
    w, h, seconds = CLIPS[name]
    key = hashlib.sha256(f"{w}x{h}x{seconds}@{FPS_IN}:fast:v2".encode()).hexdigest()[:12]
    path = Path.home() / ".cache/smg-fast/bench-videos" / f"{name}-{key}.mp4"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"encoding the {name} clip ({seconds * FPS_IN} frames) ...", flush=True)
        data = make_clip("h264", w, h, seconds * FPS_IN, fps=FPS_IN,
                         picture=texture(w + 400, h + 300, seed=7),
                         options={"preset": "fast", "threads": "2"})
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def _cpu(fn) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def floor(path: Path) -> float:
    """CPU seconds PyAV needs to decode every frame (no RGB conversion), one thread."""
    import av

    def run() -> None:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            s.codec_context.thread_count = 1
            s.codec_context.thread_type = "SLICE"
            for _ in c.decode(s):
                pass

    return _cpu(run)[0]


def reference(path: Path, family: str, repeats: int) -> tuple[dict, np.ndarray]:
    """transformers' timings and output, from the torchvision venv."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pv.npy"
        proc = subprocess.run([torchvision_python(REPO), str(REPO / "bench/video_reference.py"),
                               str(path), str(out), family, str(FPS_OUT), str(repeats)],
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", default=",".join(CLIPS))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--family", default="qwen2_vl", choices=("qwen2_vl", "qwen3_vl"))
    args = ap.parse_args()
    smg_fast.set_num_threads(1)
    vp = load_video_processor(args.family, do_sample_frames=True, fps=FPS_OUT, threads=1)
    print(f"# {cpu_model()} | 1 thread | {args.family} video defaults, {FPS_OUT} fps sampling "
          f"| CPU seconds, best of {args.repeats}")
    frames_vp = load_video_processor(args.family, do_sample_frames=False)
    print("| clip | frames kept | transformers | smg-fast | floor (decode all) | vs transformers "
          "| vs floor | processing only: transformers / smg-fast | exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.clips.split(","):
        path = clip_path(name)
        data = path.read_bytes()
        ref, ref_pv = reference(path, args.family, args.repeats)
        got = vp(data)["pixel_values_videos"]  # also the warm-up (pipelines, tables)
        ours = min(_cpu(lambda data=data: vp(data))[0] for _ in range(args.repeats))
        low = min(floor(path) for _ in range(args.repeats))
        frames, _ = load_video(data, sample=lambda m: sample_indices(vp.config, m), threads=1)
        frames_vp(frames)
        proc = min(_cpu(lambda f=frames: frames_vp(f))[0] for _ in range(args.repeats))
        exact = got.shape == ref_pv.shape and np.array_equal(got, ref_pv)
        print(f"| {name} | {ref['frames']} | {ref['cpu']:.2f} s | {ours:.2f} s | {low:.2f} s | "
              f"{ref['cpu'] / ours:.2f}x | {ours / low:.2f}x | {ref['process_cpu']:.3f} s / "
              f"{proc:.3f} s = {ref['process_cpu'] / proc:.1f}x | {exact} |", flush=True)


if __name__ == "__main__":
    main()
