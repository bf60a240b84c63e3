"""Llama 4 at 1920x1080 and 4000x3000: smg-fast against transformers' Llama4ImageProcessor.

    python bench/llama4.py [--rounds N]

transformers' class for Llama 4 is torchvision only, and torchvision lives only in the oracle venv
(.ci/oracle_venv.sh torchvision, or SMG_FAST_TV_PYTHON), so the script re-runs itself under that
venv's python with this environment's smg_fast, as bench/llava.py does. Timing is bench/gate.py's
measure_against (CPU time, one thread, interleaved rounds, ratios of the fastest runs); the
reference's output (bfloat16, widened to float32 exactly) is first checked equal to smg-fast's
float32. transformers returns bfloat16, so "transformers / smg bf16" is the like-for-like ratio.
The CPU model (lscpu) is printed with the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracle_bench import cpu_model, rerun_in_oracle_venv, timed

SIZES = ((1920, 1080), (4000, 3000))


def _inside(photo: Path, rounds: int) -> int:
    import numpy as np
    import torch
    from PIL import Image

    import smg_fast
    from smg_fast.processors.reference import reference_processor

    torch.set_num_threads(1)
    print(f"CPU: {cpu_model()}; 1 thread, torch {torch.__version__}, kernels "
          f"{smg_fast.kernel_info()['selected']}, {rounds} rounds (medians of CPU ms)\n")
    print("| size | tiles | transformers ms | smg bf16 ms | smg f32 ms | copy floor ms "
          "| transformers / smg bf16 |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    proc = smg_fast.load_processor("llama4")
    ref, why = reference_processor(proc.config)
    if ref is None:
        raise SystemExit(f"llama4: {why}")
    for size in SIZES:
        with Image.open(photo) as im:
            image = im.convert("RGB").resize(size, Image.Resampling.LANCZOS)

        def reference(image=image) -> np.ndarray:
            return ref(image, return_tensors="pt")["pixel_values"].float().numpy()

        label = f"llama4 {size[0]}x{size[1]}"
        ratios, ms = timed(label, proc, reference, image, rounds)
        tiles = proc.plan(*size).rows
        print(f"| {size[0]}x{size[1]} | {tiles} | {ms['ref']:.1f} | {ms['bfloat16']:.2f} | "
              f"{ms['float32']:.2f} | {ms['copy']:.2f} | "
              f"{1 / ratios[f'{label} bfloat16 / ref']:.1f}x |", flush=True)
    print("\n(ratios: fastest run over fastest run, as bench/gate.py; ms: medians)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--photo", type=Path, help=argparse.SUPPRESS)  # set for the inner run
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.photo is not None:
        return _inside(args.photo, args.rounds)

    return rerun_in_oracle_venv(__file__, ["--rounds", str(args.rounds)])


if __name__ == "__main__":
    sys.exit(main())
