"""Pixtral at 1920x1080: smg-fast against transformers' PIL and torchvision classes, one run.

    python bench/pixtral.py [--rounds N]

Both references need one interpreter: transformers' PixtralImageProcessor needs torchvision,
which lives only in the oracle venv (.ci/oracle_venv.sh torchvision, or SMG_FAST_TV_PYTHON), so
the script re-runs itself under that venv's python with this environment's smg_fast, as
bench/torchvision_backend.py does. Timing is bench/gate.py's measure_against (CPU time, one
thread, interleaved rounds, ratios of the fastest runs); each reference's output is first
checked equal to smg-fast's float32. The CPU model (lscpu) is printed with the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracle_bench import cpu_model, rerun_in_oracle_venv, timed

BACKENDS = {"pil": "PixtralImageProcessorPil", "torchvision": "PixtralImageProcessor"}


def _inside(photo: Path, rounds: int) -> int:
    import numpy as np
    import torch
    from gate import SIZE
    from PIL import Image

    import smg_fast
    from smg_fast.processors.reference import reference_processor, reference_return_tensors

    torch.set_num_threads(1)
    with Image.open(photo) as im:
        image = im.convert("RGB").resize(SIZE, Image.Resampling.LANCZOS)
    print(f"CPU: {cpu_model()}; {SIZE[0]}x{SIZE[1]} -> 1024x576, 1 thread, torch "
          f"{torch.__version__}, kernels {smg_fast.kernel_info()['selected']}, {rounds} rounds "
          "(medians of CPU ms)\n")
    print("| backend | transformers class | transformers ms | smg f32 ms | smg bf16 ms "
          "| copy floor ms | transformers / smg f32 |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for backend, cls in BACKENDS.items():
        proc = smg_fast.load_processor("pixtral", backend=backend)
        ref, why = reference_processor(proc.config)
        if ref is None:
            raise SystemExit(f"pixtral {backend}: {why}")
        assert type(ref).__name__ == cls, type(ref).__name__
        kind = reference_return_tensors(ref)

        def reference(ref=ref, kind=kind) -> np.ndarray:
            return np.asarray(ref(image, return_tensors=kind)["pixel_values"])

        label = f"pixtral {backend}"
        ratios, ms = timed(label, proc, reference, image, rounds)
        print(f"| {backend} | {cls} | {ms['ref']:.1f} | {ms['float32']:.2f} | "
              f"{ms['bfloat16']:.2f} | {ms['copy']:.2f} | "
              f"{1 / ratios[f'{label} float32 / ref']:.1f}x |")
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
