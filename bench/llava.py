"""LLaVA-NeXT and OneVision at 1920x1080 and 4000x3000: smg-fast against transformers' classes.

    python bench/llava.py [--rounds N] [--families llava_next,llava_onevision]

Both of transformers' classes per family (PIL and torchvision) need one interpreter: the
torchvision ones need torchvision, which lives only in the oracle venv (.ci/oracle_venv.sh
torchvision, or SMG_FAST_TV_PYTHON), so the script re-runs itself under that venv's python with
this environment's smg_fast, as bench/pixtral.py does. Timing is bench/gate.py's
measure_against (CPU time, one thread, interleaved rounds, ratios of the fastest runs); each
reference's output is first checked equal to smg-fast's float32. The CPU model (lscpu) is
printed with the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracle_bench import cpu_model, rerun_in_oracle_venv, timed

FAMILIES = ("llava_next", "llava_onevision")
SIZES = ((1920, 1080), (4000, 3000))
BACKENDS = ("pil", "torchvision")


def _inside(photo: Path, families: list[str], rounds: int) -> int:
    import numpy as np
    import torch
    from PIL import Image

    import smg_fast
    from smg_fast.processors.reference import reference_processor, reference_return_tensors

    torch.set_num_threads(1)
    print(f"CPU: {cpu_model()}; 1 thread, torch {torch.__version__}, kernels "
          f"{smg_fast.kernel_info()['selected']}, {rounds} rounds (medians of CPU ms)\n")
    print("| family | size | tiles | backend | transformers ms | smg f32 ms | smg bf16 ms "
          "| copy floor ms | transformers / smg f32 |")
    print("|---|---|--:|---|--:|--:|--:|--:|--:|")
    for family in families:
        for size in SIZES:
            with Image.open(photo) as im:
                image = im.convert("RGB").resize(size, Image.Resampling.LANCZOS)
            for backend in BACKENDS:
                proc = smg_fast.load_processor(family, backend=backend)
                ref, why = reference_processor(proc.config)
                if ref is None:
                    raise SystemExit(f"{family} {backend}: {why}")
                kind = reference_return_tensors(ref)

                def reference(ref=ref, kind=kind, image=image) -> np.ndarray:
                    return np.asarray(ref(image, return_tensors=kind)["pixel_values"])

                label = f"{family} {size[0]}x{size[1]} {backend}"
                ratios, ms = timed(label, proc, reference, image, rounds)
                tiles = proc.plan(*size).rows
                print(f"| {family} | {size[0]}x{size[1]} | {tiles} | {backend} | "
                      f"{ms['ref']:.1f} | {ms['float32']:.2f} | {ms['bfloat16']:.2f} | "
                      f"{ms['copy']:.2f} | {1 / ratios[f'{label} float32 / ref']:.1f}x |",
                      flush=True)
    print("\n(ratios: fastest run over fastest run, as bench/gate.py; ms: medians)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, of {', '.join(FAMILIES)} (default all)")
    parser.add_argument("--photo", type=Path, help=argparse.SUPPRESS)  # set for the inner run
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if set(families) - set(FAMILIES) or not families:
        parser.error(f"--families takes {', '.join(FAMILIES)}")
    if args.photo is not None:
        return _inside(args.photo, families, args.rounds)

    return rerun_in_oracle_venv(__file__, ["--rounds", str(args.rounds)])


if __name__ == "__main__":
    sys.exit(main())
