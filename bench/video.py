"""Videos: transformers' path against smg-fast against the decoder floor, on 1 or N threads.

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

With ``--threads N`` (N >= 2) every figure is WALL seconds (best of --repeats) instead:

- smg-fast: ``smg_fast.set_num_threads(N)`` and ``load_video_processor(..., threads=N)``: N
  FFmpeg threads per decoder, and an H.264 / HEVC clip with wanted frames in several IDR groups
  decoded as up to N runs of groups on threads of their own, skipping the frames not needed
  (smg_fast/video/parallel_decode.py); a clip with one group (the 720p one) decodes on one
  decoder with FFmpeg's frame threads instead, up to the last kept frame, skipping the
  non-reference frames not kept (smg_fast/video/skip_decode.py). The "decode" column says
  which;
- transformers, twice: torch on 1 thread and torch on N threads (its loader's decoder threads
  are its own either way: PyAV's defaults, see bench/video_reference.py);
- floor: PyAV decoding every frame with N frame + slice threads (FFmpeg's "AUTO").

Each wall figure has the CPU seconds of the same best run beside it (all threads), and the load
average is printed before and after: wall seconds follow other load on the host.

    PYTHONPATH=src python bench/video.py [--clips 720p,1080p,4k] [--repeats 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from gate import cpu_model

import smg_fast
from smg_fast.processors.loader import load_video_processor
from smg_fast.processors.video import VideoProcessor
from smg_fast.processors.video_plan import sample_indices
from smg_fast.testing.oracle_venv import torchvision_python
from smg_fast.testing.video_clips import make_clip, texture
from smg_fast.video import load_video, open_video
from smg_fast.video.parallel_decode import plan_packets, plan_runs

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


def _cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """CPU and wall seconds of one call of fn (CPU: every thread of this process)."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def floor(path: Path, threads: int = 1) -> tuple[float, float]:
    """CPU and wall seconds PyAV needs to decode every frame (no RGB conversion).

    threads 1: one thread (slice threads, count 1); more: that many frame + slice threads."""
    import av

    def run() -> None:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            s.codec_context.thread_count = threads
            s.codec_context.thread_type = "SLICE" if threads == 1 else "AUTO"
            for _ in c.decode(s):
                pass

    return _cpu(run)


def reference(path: Path, family: str, repeats: int,
              torch_threads: int = 1) -> tuple[dict, np.ndarray]:
    """transformers' timings and output, from the torchvision venv, torch on torch_threads."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pv.npy"
        proc = subprocess.run([torchvision_python(REPO), str(REPO / "bench/video_reference.py"),
                               str(path), str(out), family, str(FPS_OUT), str(repeats),
                               str(torch_threads)],
                              capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


def decode_path(data: bytes, vp: VideoProcessor, threads: int) -> str:
    """How smg-fast decodes the clip's kept frames on threads: GOP runs, or one decoder."""
    header = open_video(0, data)
    try:
        wanted = sorted({int(i) for i in sample_indices(vp.config, header.metadata())})
        plan = plan_packets(header)
        if plan is None:
            return "1 decoder (not plannable)"
        groups = len(plan.starts)
        runs = len(plan_runs(plan, wanted, threads))
    finally:
        header.close()
    if runs >= 2:
        return f"{runs} GOP runs ({groups} IDR groups)"
    return (f"1 decoder, {threads} frame threads, skip decode ({groups} IDR "
            f"group{'s' * (groups > 1)})")


def _load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def one_thread(args: argparse.Namespace) -> None:
    """The 1-thread table: CPU seconds, with the processing-only column."""
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
        low = min(floor(path)[0] for _ in range(args.repeats))  # CPU seconds
        frames, _ = load_video(data, sample=lambda m: sample_indices(vp.config, m), threads=1)
        frames_vp(frames)
        proc = min(_cpu(lambda f=frames: frames_vp(f))[0] for _ in range(args.repeats))
        exact = got.shape == ref_pv.shape and np.array_equal(got, ref_pv)
        print(f"| {name} | {ref['frames']} | {ref['cpu']:.2f} s | {ours:.2f} s | {low:.2f} s | "
              f"{ref['cpu'] / ours:.2f}x | {ours / low:.2f}x | {ref['process_cpu']:.3f} s / "
              f"{proc:.3f} s = {ref['process_cpu'] / proc:.1f}x | {exact} |", flush=True)


def threaded(args: argparse.Namespace) -> None:
    """The N-thread table: wall seconds, transformers with torch on 1 and on N threads."""
    n = args.threads
    smg_fast.set_num_threads(n)
    vp = load_video_processor(args.family, do_sample_frames=True, fps=FPS_OUT, threads=n)
    print(f"# {cpu_model()} | {n} threads | {args.family} video defaults, {FPS_OUT} fps sampling "
          f"| wall seconds, best of {args.repeats} | load average {_load()} (1 / 5 / 15 min) "
          f"at the start, {os.cpu_count()} CPUs")
    print(f"| clip | frames kept | transformers, torch 1 thread (CPU) "
          f"| transformers, torch {n} threads (CPU) | smg-fast {n} threads (CPU) "
          f"| floor (decode all, {n} threads) "
          f"| vs transformers torch 1 | vs transformers torch {n} | vs floor | decode | exact |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.clips.split(","):
        path = clip_path(name)
        data = path.read_bytes()
        ref1, pv1 = reference(path, args.family, args.repeats, 1)
        refn, pvn = reference(path, args.family, args.repeats, n)
        got = vp(data)["pixel_values_videos"]  # also the warm-up (pipelines, tables)
        cpu, wall = min((_cpu(lambda data=data: vp(data)) for _ in range(args.repeats)),
                        key=lambda t: t[1])
        low = min(floor(path, n)[1] for _ in range(args.repeats))
        exact = all(got.shape == pv.shape and np.array_equal(got, pv) for pv in (pv1, pvn))
        print(f"| {name} | {ref1['frames']} | {ref1['wall']:.2f} s ({ref1['cpu']:.2f} s) | "
              f"{refn['wall']:.2f} s ({refn['cpu']:.2f} s) | {wall:.2f} s ({cpu:.2f} s) | "
              f"{low:.2f} s | {ref1['wall'] / wall:.2f}x | {refn['wall'] / wall:.2f}x | "
              f"{wall / low:.2f}x | {decode_path(data, vp, n)} | {exact} |", flush=True)
    print(f"# load average at the end: {_load()}")


def main() -> None:
    """Parses the options and prints the table for 1 thread or for --threads N."""
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="1 thread (the default) prints CPU seconds; --threads N (N >= 2) prints wall "
               "seconds, transformers timed with torch on 1 and on N threads. Clips: "
               + ", ".join(f"{k} ({w}x{h}, {s} s)" for k, (w, h, s) in CLIPS.items()) + ".")
    ap.add_argument("--clips", default=",".join(CLIPS),
                    help="comma-separated clips to run (default: all)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="timed runs per measurement; the best is shown (default: 2)")
    ap.add_argument("--family", default="qwen2_vl", choices=("qwen2_vl", "qwen3_vl"),
                    help="whose video processor defaults (default: qwen2_vl)")
    ap.add_argument("--threads", type=int, default=1, metavar="N",
                    help="smg-fast's threads (native and decoding); N >= 2 times wall seconds "
                         "against transformers with torch on 1 and on N threads (default: 1)")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    unknown = set(args.clips.split(",")) - set(CLIPS)
    if unknown:
        ap.error(f"unknown clip(s) {sorted(unknown)}: choose from {', '.join(CLIPS)}")
    (one_thread if args.threads == 1 else threaded)(args)


if __name__ == "__main__":
    main()
