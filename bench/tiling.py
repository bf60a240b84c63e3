"""The tiling families at 1920x1080 and 4000x3000, from a PIL image and from JPEG bytes, one run.

    python bench/tiling.py [--rounds N] [--families internvl,llava_next,...] [--sizes 1920x1080]

For each family, size and backend: transformers' class (PIL or torchvision; Llama 4 and
Phi-4-multimodal have only the torchvision one) against smg-fast configured the same, on the same
PIL image and on the same JPEG's bytes (the reference then opens them as transformers' load_image
does, as a server would), the copy floor (np.copyto of the output into a touched buffer) and the
source copy (np.copyto of the image's RGB bytes: what any resize of it reads at least once). Each
reference's output is first checked equal to smg-fast's (np.array_equal; bfloat16 bits for Llama
4, whose class returns bfloat16). Timing as bench/gate.py: CPU time, one thread (torch too),
interleaved rounds, smg-fast INNER times a round; ratios are fastest run over fastest run, ms
columns medians. The torchvision classes need the oracle venv, so the script re-runs itself there
(bench/oracle_bench.py). Prints the CPU model and the kernel set (SMG_FAST_ISA=avx2 caps it).

The last column, transformers' time over the two copies' time, is a scale, not a bound: what an
implementation that did nothing but copy the source and the output once each would reach (an
exact one reads the source at least once and writes the output once). smg-fast's images are
allocated with Pillow's single-block allocator on, as the engine plug-ins set it
(``--pillow-blocks pillow``: Pillow's default 16 MiB blocks, which smg-fast copies out of once);
transformers' always in Pillow's default blocks, as its users have them (its torchvision classes
may run slower on a single block). smg-fast's calls repeat one shape, so their weights and plans
come from its shape cache (csrc/resample/shape_cache.hpp): a first sight of a shape costs about
0.1-0.4 ms more per resize.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oracle_bench import cpu_model, rerun_in_oracle_venv

FAMILIES = ("internvl", "llava_next", "llava_onevision", "llama4", "pixtral", "idefics3",
            "phi4_multimodal")
TORCHVISION_ONLY = ("llama4", "phi4_multimodal")  # transformers has no PIL class for them
OUTPUT = {"phi4_multimodal": "image_pixel_values"}  # the tiles' key, where not pixel_values
SIZES = ((1920, 1080), (4000, 3000))
INNER = 3


def _cpu() -> str:
    """lscpu's model name with /proc/cpuinfo's cpu family and model numbers."""
    ids = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("cpu family", "model") and key.strip() not in ids:
                    ids[key.strip()] = value.strip()
    except OSError:
        pass
    return f"{cpu_model()} (cpu family {ids.get('cpu family', '?')}, model {ids.get('model', '?')})"


def _backends(family: str) -> tuple[str, ...]:
    return ("torchvision",) if family in TORCHVISION_ONLY else ("torchvision", "pil")


def _row(family, size, backend, images, jpeg, rounds, one_block):
    """One table row: (cells, ratio of transformers to smg on PIL images, on JPEG bytes)."""
    import gc
    import io
    import statistics
    import time

    import numpy as np
    from PIL import Image
    from transformers.image_utils import load_image

    import smg_fast
    from smg_fast.processors.reference import reference_processor, reference_return_tensors

    proc = smg_fast.load_processor(family, backend=backend)
    ref, why = reference_processor(proc.config)
    if ref is None:
        raise SystemExit(f"{family} {backend}: {why}")
    kind = reference_return_tensors(ref)
    dtype = "bfloat16" if family == "llama4" else "float32"

    def bits(pv) -> np.ndarray:
        if hasattr(pv, "dtype") and str(pv.dtype) == "torch.bfloat16":
            import torch

            return pv.view(torch.uint16).numpy()
        return np.asarray(pv)

    key = OUTPUT.get(family, "pixel_values")

    image, their_image = images
    plain = smg_fast.use_single_block_images  # transformers' side: Pillow's own blocks

    def theirs(src) -> np.ndarray:
        return bits(ref(src, return_tensors=kind)[key])

    def theirs_jpeg() -> np.ndarray:
        plain(False)
        try:
            return theirs(load_image(Image.open(io.BytesIO(jpeg))))
        finally:
            plain(one_block)

    def ours(src) -> np.ndarray:
        return np.asarray(proc(src, dtype=dtype)[key])

    expected = ours(image)
    for label, got, want in (("PIL image", expected, theirs(their_image)),
                             ("JPEG bytes", ours(jpeg), theirs_jpeg())):
        if got.shape != want.shape or not np.array_equal(got, want):
            raise AssertionError(f"{family} {backend} {label}: transformers' output differs")
    src = expected.reshape(-1).view(np.uint8)
    dst = np.empty_like(src)
    dst[...] = src
    pixels = np.asarray(image).reshape(-1)
    pixels_dst = np.empty_like(pixels)
    pixels_dst[...] = pixels
    fast = {"copy": lambda: np.copyto(dst, src), "smg pil": lambda: proc(image, dtype=dtype),
            "smg jpeg": lambda: proc(jpeg, dtype=dtype),
            "source": lambda: np.copyto(pixels_dst, pixels)}
    slow = {"ref pil": lambda: theirs(their_image), "ref jpeg": theirs_jpeg}
    for fn in fast.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in [*fast, *slow]}

    def timed(fn) -> float:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0

    before = smg_fast.get_num_threads()
    smg_fast.set_num_threads(1)
    gc.collect()
    gc.disable()
    try:
        names = list(fast)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name] += [timed(fast[name]) for _ in range(INNER)]
            for name, fn in slow.items():
                samples[name].append(timed(fn))
    finally:
        gc.enable()
        smg_fast.set_num_threads(before)
    ms = {k: 1e3 * statistics.median(v) for k, v in samples.items()}
    best = {k: min(v) for k, v in samples.items()}
    pil_x = best["ref pil"] / best["smg pil"]
    jpeg_x = best["ref jpeg"] / best["smg jpeg"]
    floor_x = best["smg pil"] / best["copy"]
    copies_x = best["ref pil"] / (best["source"] + best["copy"])
    cells = (f"| {family} | {size[0]}x{size[1]} | {backend} | {expected.size * 4 / 1e6:.1f} | "
             f"{ms['ref pil']:.1f} | {ms['smg pil']:.2f} | {pil_x:.1f}x | {ms['ref jpeg']:.1f} | "
             f"{ms['smg jpeg']:.2f} | {jpeg_x:.1f}x | {ms['copy']:.2f} | {floor_x:.1f}x | "
             f"{ms['source']:.2f} | {copies_x:.1f}x |")
    return cells


def _inside(photo: Path, families: list[str], sizes: list[tuple[int, int]], rounds: int,
            blocks: str) -> int:
    import io

    import torch
    from PIL import Image

    import smg_fast

    torch.set_num_threads(1)
    one_block = smg_fast.use_single_block_images(blocks == "one")
    print(f"CPU: {_cpu()}; 1 thread, torch {torch.__version__}, kernels "
          f"{smg_fast.kernel_info()['selected']}, {rounds} rounds (medians of CPU ms; ratios "
          "fastest over fastest), Pillow images in "
          f"{'one block' if one_block else 'its default blocks'}\n")
    print("| family | size | backend | output MB (f32) | transformers ms (PIL in) "
          "| smg ms (PIL in) | x | transformers ms (JPEG in) | smg ms (JPEG in) | x "
          "| copy floor ms | smg (PIL in) / copy | source copy ms | x at the copies |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for size in sizes:
        with Image.open(photo) as im:
            image = im.convert("RGB").resize(size, Image.Resampling.LANCZOS)
        smg_fast.use_single_block_images(False)
        their_image = image.copy()  # in Pillow's own blocks, as transformers' users have it
        smg_fast.use_single_block_images(one_block)
        buf = io.BytesIO()
        image.save(buf, "JPEG", quality=95)
        jpeg = buf.getvalue()
        for family in families:
            for backend in _backends(family):
                print(_row(family, size, backend, (image, their_image), jpeg, rounds, one_block),
                      flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, of {', '.join(FAMILIES)} (default all)")
    parser.add_argument("--sizes", default="1920x1080,4000x3000",
                        help="comma-separated WxH (default 1920x1080,4000x3000)")
    parser.add_argument("--pillow-blocks", choices=("one", "pillow"), default="one",
                        help="how Pillow allocates smg-fast's images: one block, as smg-fast's "
                             "engine plug-ins set it (default), or its own 16 MiB blocks")
    parser.add_argument("--photo", type=Path, help=argparse.SUPPRESS)  # set for the inner run
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if set(families) - set(FAMILIES) or not families:
        parser.error(f"--families takes {', '.join(FAMILIES)}")
    try:
        sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",") if s]
    except ValueError:
        parser.error("--sizes takes WxH,WxH")
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        parser.error("--sizes takes WxH,WxH")
    if args.photo is not None:
        return _inside(args.photo, families, sizes, args.rounds, args.pillow_blocks)
    return rerun_in_oracle_venv(__file__, ["--rounds", str(args.rounds), "--families",
                                           ",".join(families), "--sizes", args.sizes,
                                           "--pillow-blocks", args.pillow_blocks])


if __name__ == "__main__":
    sys.exit(main())
