"""Command line: preprocess images and print what a serving stack would receive.

    python -m smg_fast                      # built-in 1920x1080 test pattern, qwen2_vl
    python -m smg_fast photo.jpg --model kimi_k25 --dtype bfloat16
    python -m smg_fast photo.jpg --check    # also compare with transformers (bit-exact or not)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from . import FAMILIES, InvalidImageError, get_num_threads, load_processor, set_num_threads
from .imaging.sample import sample_image
from .processors import BACKENDS, Processor, get_family


def _check(proc: Processor, image: object, ours: np.ndarray) -> str:
    """transformers' verdict on float32 output, from its class for proc's family and backend.

    The class comes from processors/reference.py, the one reference builder."""
    from .processors.reference import quiet_transformers_import, reference_pixel_values

    if not quiet_transformers_import():
        return ("check skipped: transformers is not installed; pip install transformers==5.24.0 "
                "(no torch needed) and rerun to compare bit for bit")
    ref, why = reference_pixel_values(proc.config, image)
    if ref is None:
        return f"check skipped: {why}"
    same = np.array_equal(ref, ours)
    return "bit-exact with transformers" if same else "DIFFERS from transformers"


def _decoders_line() -> str:
    """Each fast decoder's state; in use means it matched Pillow on this install's self-check."""
    from .imaging import decoders

    state = decoders.available()
    engine = decoders.jpeg_engine()
    jpeg = ("in use (bit-exact with Pillow): Pillow's own library, 2 row bands when idle"
            if state[decoders.LIBJPEG_TURBO] and engine == decoders.PILLOW_LIBJPEG else
            "in use (bit-exact with Pillow): simplejpeg's copy, whole images (no jpeglib.h at "
            "build time)" if state[decoders.LIBJPEG_TURBO] else "off (Pillow decodes JPEG)")
    png = ("zlib-ng inflates (bit-exact with Pillow)" if state[decoders.ZLIB_NG] else
           "zlib inflates (bit-exact with Pillow; pip install 'smg-fast[png]' for zlib-ng, "
           "about 3x faster)" if state[decoders.ZLIB] else "off (Pillow decodes PNG)")
    return f"libjpeg-turbo {jpeg}; PNG {png}"


def main(argv: list[str] | None = None) -> int:
    """The command line; returns its exit status (1 when --check finds a difference)."""
    ap = argparse.ArgumentParser(
        prog="python -m smg_fast",
        description="Preprocess images into VLM encoder inputs (HF-exact) and report shapes, "
                    "grids, token counts and timing.",
    )
    ap.add_argument("images", nargs="*", help="image files (default: a built-in 1920x1080 "
                    "test pattern)")
    ap.add_argument("--model", default="qwen2_vl",
                    help=f"family ({', '.join(FAMILIES)}) or a HF model folder (default qwen2_vl)")
    defaults: dict[str, list[str]] = {}
    for name in FAMILIES:
        defaults.setdefault(get_family(name).builtin.backend, []).append(name)
    own = "; ".join(f"{backend} for {', '.join(fams)}" for backend, fams in defaults.items())
    ap.add_argument("--backend", default=None, choices=list(BACKENDS),
                    help=f"the reference reproduced (default: a folder's named class; a family's "
                         f"own default: {own})")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--threads", type=int, default=None,
                    help="native threads (default: SMG_FAST_NUM_THREADS or all CPUs)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per image (median shown)")
    ap.add_argument("--check", action="store_true",
                    help="compare float32 output with transformers' processor for the backend "
                         "(exit status 1 when it differs) and report the fast decoders' "
                         "self-check")
    ap.add_argument("--check-engine", action="store_true",
                    help="say whether the vLLM / SGLang plug-ins are installed and on here, and "
                         "which image processor class transformers returns with smg-fast "
                         "registered, then exit")
    args = ap.parse_args(argv)

    if args.check_engine:
        from .integrations.check import plugin_lines, resolved_line
        from .processors.reference import quiet_transformers_import

        quiet_transformers_import()
        for line in [*plugin_lines(), resolved_line()]:
            print(line)
        return 0
    if args.threads is not None:
        set_num_threads(args.threads)
    try:
        proc = load_processor(args.model, backend=args.backend)
    except (ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    inputs: list[tuple[str, object]] = [(p, p) for p in args.images] or [
        ("test-pattern 1920x1080", sample_image())
    ]
    print(f"model={args.model} dtype={args.dtype} threads={get_num_threads()}")
    if args.check:
        print(f"fast decoders: {_decoders_line()}")
    status = 0
    for name, image in inputs:
        try:
            times = []
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                out = proc(image, dtype=args.dtype)
                times.append(time.perf_counter() - t0)
        except InvalidImageError as exc:
            print(f"{name}: invalid image: {exc.problem}", file=sys.stderr)
            status = 1
            continue
        pv = out["pixel_values"]
        # families whose outputs hold no grid (Gemma's whole images, Gemma 4's position ids)
        grid = out["image_grid_thw"][0].tolist() if "image_grid_thw" in out else "-"
        line = (f"{name}: pixel_values {tuple(pv.shape)} {args.dtype} grid_thw {grid} "
                f"tokens {int(out['num_tokens'][0])} {statistics.median(times) * 1e3:.2f} ms")
        if args.check:
            f32 = out["pixel_values"] if args.dtype == "float32" else proc(image)["pixel_values"]
            verdict = _check(proc, image, f32)
            line += f" | {verdict}"
            if verdict.startswith("DIFFERS"):
                status = 1
        print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
