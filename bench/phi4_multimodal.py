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

        def reference(image=image) -> np.ndarray:
            return ref(image, return_tensors="pt")["image_pixel_values"].numpy()

        label = f"phi4_multimodal {size[0]}x{size[1]}"
        ratios, ms = timed(label, proc, reference, image, rounds, dtypes=("float32",),
                           output="image_pixel_values")
        crops = np.asarray(proc(image)["image_pixel_values"]).shape[1]
        print(f"| {size[0]}x{size[1]} | {crops} | {ms['ref']:.1f} | {ms['float32']:.1f} | "
              f"{ms['copy']:.2f} | {1 / ratios[f'{label} float32 / ref']:.1f}x | "
              f"{ratios[f'{label} float32 / copy']:.1f}x |", flush=True)
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
