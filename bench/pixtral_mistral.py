"""Pixtral's Mistral-format numerics: smg-fast against mistral_common's ImageEncoder, one run.

    python bench/pixtral_mistral.py [--rounds N]

mistral_common (and the OpenCV it resizes with) lives in the vLLM venv, so the script re-runs
itself there with this environment's smg_fast. Inputs: the bench photo resized to 1920x1080 and
to 4000x3000 (RGB); configuration Pixtral-12B's (patch 16, max 1024). Per round, interleaved, in
CPU time on one thread (cv2.setNumThreads(1), smg_fast.set_num_threads(1)): mistral_common with
OpenCV's IPP on (its default), with IPP off (the numbers smg-fast reproduces: its output is first
checked equal), and smg-fast's call. Prints medians and median ratios with the CPU model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from oracle_bench import REPO, cpu_model

SIZES = ((1920, 1080), (4000, 3000))


def _inside(photo: Path, rounds: int) -> int:
    import cv2
    import numpy as np
    from mistral_common.protocol.instruct.chunk import ImageChunk
    from mistral_common.tokens.tokenizers.image import ImageConfig, ImageEncoder, SpecialImageIDs
    from PIL import Image

    import smg_fast

    cv2.setNumThreads(1)
    smg_fast.set_num_threads(1)
    encoder = ImageEncoder(ImageConfig(16, 1024), SpecialImageIDs(img=10, img_break=12,
                                                                  img_end=13))
    proc = smg_fast.load_processor("pixtral", backend="upstream")
    print(f"CPU: {cpu_model()}; Pixtral-12B (16 / 1024), 1 thread, OpenCV {cv2.__version__} "
          f"({cv2.ipp.getIppVersion()}), kernels {smg_fast.kernel_info()['selected']}, "
          f"{rounds} rounds (medians of CPU ms)\n")
    print("| input | output | mistral_common IPP on ms | IPP off ms | smg-fast ms "
          "| IPP on / smg | IPP off / smg |")
    print("|---|---|--:|--:|--:|--:|--:|")
    with Image.open(photo) as im:
        base = im.convert("RGB")
    for size in SIZES:
        image = base.resize(size, Image.Resampling.LANCZOS)

        def mistral(ipp: bool, image=image) -> np.ndarray:
            cv2.ipp.setUseIPP(ipp)
            return encoder(ImageChunk(image=image)).image

        ours = proc(image)["pixel_values"][0]
        ref = mistral(False)
        assert np.array_equal(ours, ref), f"{size}: smg-fast differs from mistral_common"
        runs: dict[str, list[float]] = {"on": [], "off": [], "smg": []}
        for _ in range(rounds):
            for name, fn in (("on", lambda: mistral(True)), ("off", lambda: mistral(False)),
                             ("smg", lambda image=image: proc(image))):
                t0 = time.process_time()
                fn()
                runs[name].append(time.process_time() - t0)
        ms = {k: 1e3 * statistics.median(v) for k, v in runs.items()}
        print(f"| {size[0]}x{size[1]} | {ref.shape[2]}x{ref.shape[1]} | {ms['on']:.1f} | "
              f"{ms['off']:.1f} | {ms['smg']:.1f} | {ms['on'] / ms['smg']:.1f}x | "
              f"{ms['off'] / ms['smg']:.1f}x |")
    cv2.ipp.setUseIPP(True)
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
    from references import photo_file

    from smg_fast.testing.engine_env import engine_python, run_in_venv
    from smg_fast.testing.oracle_venv import OracleVenvMissing

    try:
        python = engine_python("vllm", REPO)
    except OracleVenvMissing as exc:
        raise SystemExit(str(exc)) from None
    with tempfile.TemporaryDirectory() as only:
        import smg_fast

        Path(only, "smg_fast").symlink_to(Path(smg_fast.__file__).resolve().parent)
        run = run_in_venv(python, [__file__, "--photo", str(photo_file()),
                                   "--rounds", str(args.rounds)], Path(only),
                          env={"PYTHONPATH": f"{only}:{Path(__file__).parent}"})
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr[-4000:])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
