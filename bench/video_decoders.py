"""Videos: what each decoder's conversion costs smg-fast, one thread.

The bench's clips (bench/video.py: 30 fps H.264, cached), Qwen2-VL's video processor sampling 2
fps, CPU seconds (median of --repeats) per decoder (``pyav``, ``torchcodec``, ``opencv``), and
each decoder's ratio to ``pyav``. The pixels differ only where the conversions do (not on these
8-bit 4:2:0 clips); the cost differs by swscale's path and by the extra header work (the
rotation read, torchcodec's packet scan).

    PYTHONPATH=src python bench/video_decoders.py [--clips 720p] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from gate import cpu_model
from video import CLIPS, FPS_OUT, _cpu, clip_path

import smg_fast
from smg_fast.processors.loader import load_video_processor
from smg_fast.video import DECODERS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", default="720p")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    smg_fast.set_num_threads(1)
    vp = load_video_processor("qwen2_vl", do_sample_frames=True, fps=FPS_OUT, threads=1)
    print(f"# {cpu_model()} | 1 thread | qwen2_vl video defaults, {FPS_OUT} fps sampling | "
          f"CPU seconds, median of {args.repeats}")
    print("| clip | " + " | ".join(DECODERS) + " | " +
          " | ".join(f"{d} / pyav" for d in DECODERS[1:]) + " | same pixels |")
    print("|---|" + "---|" * (2 * len(DECODERS)))
    for name in args.clips.split(","):
        if name not in CLIPS:
            raise SystemExit(f"unknown clip {name!r} (one of {', '.join(CLIPS)})")
        data = clip_path(name).read_bytes()
        outs = {d: vp(data, decoder=d)["pixel_values_videos"] for d in DECODERS}  # warm-up
        times: dict[str, list[float]] = {d: [] for d in DECODERS}
        for _ in range(args.repeats):  # interleaved, so a busy spell hits every decoder
            for d in DECODERS:
                times[d].append(_cpu(lambda d=d, data=data: vp(data, decoder=d))[0])
        med = {d: statistics.median(t) for d, t in times.items()}
        same = all(np.array_equal(outs[d], outs["pyav"]) for d in DECODERS)
        print(f"| {name} | " + " | ".join(f"{med[d]:.3f} s" for d in DECODERS) + " | " +
              " | ".join(f"{med[d] / med['pyav']:.2f}x" for d in DECODERS[1:]) +
              f" | {same} |", flush=True)


if __name__ == "__main__":
    main()
