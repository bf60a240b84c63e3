"""Phi-4-multimodal at 1920x1080 and 4000x3000: smg-fast against Phi4MultimodalImageProcessor.

    python bench/phi4_multimodal.py [--rounds N]

transformers' class is torchvision only, so the script re-runs itself in the oracle venv with this
environment's smg_fast (bench/oracle_bench.py). The reference's image_pixel_values is first
checked equal to smg-fast's; then CPU time (one thread, interleaved rounds) of transformers' call,
smg-fast's float32 call (the only dtype the family computes) and a copy of the output (the copy
floor) is measured. Ratios are of the fastest runs, as bench/gate.py computes them; ms are
medians. The CPU model (lscpu) is printed with the table.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

from gate import _timed
from oracle_bench import cpu_model, rerun_in_oracle_venv

SIZES = ((1920, 1080), (4000, 3000))


def _inside(photo: Path, rounds: int) -> int:
    import numpy as np
    import torch
    from PIL import Image

    import smg_fast
    from smg_fast.processors.reference import reference_processor

    torch.set_num_threads(1)
    smg_fast.set_num_threads(1)
    print(f"CPU: {cpu_model()}; 1 thread, torch {torch.__version__}, kernels "
          f"{smg_fast.kernel_info()['selected']}, {rounds} rounds (medians of CPU ms)\n")
    print("| size | crops + global | transformers ms | smg f32 ms | copy floor ms "
          "| transformers / smg | smg / copy |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    proc = smg_fast.load_processor("phi4_multimodal")
    ref, why = reference_processor(proc.config)
    if ref is None:
        raise SystemExit(f"phi4_multimodal: {why}")
    for size in SIZES:
        with Image.open(photo) as im:
            image = im.convert("RGB").resize(size, Image.Resampling.LANCZOS)
        ours = np.asarray(proc(image)["image_pixel_values"])
        if not np.array_equal(ref(image, return_tensors="pt")["image_pixel_values"].numpy(),
                              ours):
            raise AssertionError(f"{size}: the reference's output differs from smg-fast's")
        src = ours.reshape(-1).view(np.uint8)
        dst = np.empty_like(src)
        dst[...] = src
        calls = {"ref": lambda image=image: ref(image, return_tensors="pt"),
                 "smg": lambda image=image: proc(image),
                 "copy": lambda dst=dst, src=src: np.copyto(dst, src)}
        samples: dict[str, list[float]] = {k: [] for k in calls}
        gc.collect()
        gc.disable()
        try:
            names = list(calls)
            for r in range(rounds):
                for name in names[r % 3:] + names[:r % 3]:
                    samples[name].append(_timed(calls[name]))
        finally:
            gc.enable()
        ms = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
        best = {k: min(v) for k, v in samples.items()}
        print(f"| {size[0]}x{size[1]} | {ours.shape[1]} | {ms['ref']:.1f} | {ms['smg']:.1f} | "
              f"{ms['copy']:.2f} | {best['ref'] / best['smg']:.1f}x | "
              f"{best['smg'] / best['copy']:.1f}x |", flush=True)
    print("\n(ratios: fastest run over fastest run, as bench/gate.py; ms: medians)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--photo", type=Path, help=argparse.SUPPRESS)  # set for the inner run
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.photo is not None:
        return _inside(args.photo, args.rounds)
    return rerun_in_oracle_venv(__file__, ["--rounds", str(args.rounds)])


if __name__ == "__main__":
    sys.exit(main())
