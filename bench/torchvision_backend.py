"""smg-fast's backend="torchvision" against transformers' torchvision image processors.

Qwen2VLImageProcessor, Kimi_K25ImageProcessor and Glm4vImageProcessor, at 1920x1080 on one
thread, in one run.

    python bench/torchvision_backend.py [--rounds N] [--families qwen2_vl,kimi_k25] [--jpeg]

--jpeg: the input is the image's JPEG bytes (Pillow, quality 90, 4:2:0) instead of the PIL image:
transformers' time then includes Pillow's decode, smg-fast's its own (Pillow's libjpeg, driven
natively, overlapped with the resize on more threads; one thread here).

transformers' torchvision classes need torchvision, which lives only in the oracle venv
(.ci/oracle_venv.sh torchvision, or SMG_FAST_TV_PYTHON), so this script re-runs itself
under that venv's python, importing the smg_fast this environment has (installed or built in
place) through a folder holding only that package. Timing is bench/gate.py's: CPU time, the copy
floor, smg-fast float32 and bfloat16 and the reference interleaved round by round, ratios of the
fastest runs; every reference output is first checked equal to smg-fast's float32. The last
column, transformers over the copy floor, is about what 'transformers / smg f32' becomes for a core
that runs at the copy floor: where smg f32 / copy is near 1, a larger ratio needs a host where
transformers is slower relative to memory, not a faster core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracle_bench import cpu_model, rerun_in_oracle_venv, timed

FAMILIES = ("qwen2_vl", "qwen3_vl", "kimi_k25", "glm4v")
FAMILIES += ("paddleocr_vl", "ernie4_5_vl_moe", "hunyuan_vl")
FAMILIES += ("gemma3", "gemma3n", "gemma4")
FAMILIES += ("internvl",)
FAMILIES += ("pixtral",)
FAMILIES += ("llava_next", "llava_onevision")
FAMILIES += ("idefics3",)


def _inside(photo: Path, families: list[str], rounds: int, jpeg: bool) -> int:
    import io

    import numpy as np
    import torch
    from gate import SIZE
    from PIL import Image

    import smg_fast
    from smg_fast.processors.reference import reference_processor, reference_return_tensors

    torch.set_num_threads(1)
    with Image.open(photo) as im:
        image = im.convert("RGB").resize(SIZE, Image.Resampling.LANCZOS)
    data = b""
    if jpeg:
        out = io.BytesIO()
        image.save(out, "JPEG", quality=90)
        data = out.getvalue()
    print(f"{SIZE[0]}x{SIZE[1]} {'JPEG bytes' if jpeg else 'PIL image'}, 1 thread, "
          f"CPU {cpu_model()}, torch {torch.__version__}, kernels "
          f"{smg_fast.kernel_info()['selected']}, {rounds} rounds (medians of CPU ms)\n")
    print("| family | transformers torchvision ms | smg f32 ms | smg bf16 ms | copy floor ms "
          "| transformers / smg f32 | smg f32 / copy | transformers / copy |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for family in families:
        proc = smg_fast.load_processor(family, backend="torchvision")
        ref, why = reference_processor(proc.config)
        if ref is None:
            raise SystemExit(f"{family}: {why}")
        kind = reference_return_tensors(ref)

        def reference(ref=ref, kind=kind) -> np.ndarray:
            src = Image.open(io.BytesIO(data)) if jpeg else image
            return np.asarray(ref(src, return_tensors=kind)["pixel_values"])

        ratios, ms = timed(family, proc, reference, data if jpeg else image, rounds)
        print(f"| {family} | {ms['ref']:.1f} | {ms['float32']:.2f} | {ms['bfloat16']:.2f} | "
              f"{ms['copy']:.2f} | {1 / ratios[f'{family} float32 / ref']:.1f}x | "
              f"{ratios[f'{family} float32 / copy']:.2f}x | "
              f"{ratios[f'{family} float32 / copy'] / ratios[f'{family} float32 / ref']:.1f}x |")
    print("\n(ratios: fastest run over fastest run, as bench/gate.py; ms: medians; transformers /"
          " copy: about\nthe 'transformers / smg f32' of a core running at the copy floor)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated (default {','.join(FAMILIES)})")
    parser.add_argument("--jpeg", action="store_true",
                        help="the input is JPEG bytes (decode included on both sides)")
    parser.add_argument("--photo", type=Path, help=argparse.SUPPRESS)  # set for the inner run
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if args.rounds < 1 or not set(families) <= set(FAMILIES):
        parser.error(f"--rounds must be >= 1 and --families a subset of {','.join(FAMILIES)}")
    if args.photo is not None:
        return _inside(args.photo, families, args.rounds, args.jpeg)

    return rerun_in_oracle_venv(__file__, ["--rounds", str(args.rounds),
                                           "--families", ",".join(families),
                                           *(["--jpeg"] if args.jpeg else [])])


if __name__ == "__main__":
    sys.exit(main())
