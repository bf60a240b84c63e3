"""The resampler's passes and the processors around them, on 1 native thread.

Not part of the test command. Random 1920x1080 content, each pass on its own (horizontal only:
1920 -> 1932 wide; vertical only: 1080 -> 1092 high; Pillow's and torch's weights), RGBX, a strong
downscale, and the qwen2_vl processor (PIL image, float32) with the pil and torchvision backends.
Every case runs once per round, all cases interleaved, timed in process CPU time; medians and
minimums in ms. Compare kernel sets with SMG_FAST_ISA (avx2, baseline, ...), one process each.

    SMG_FAST_ISA=avx2 python bench/resample_passes.py [--rounds 21] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from PIL import Image

import smg_fast
from smg_fast import _native

F, P, R = _native.Filter, _native.PassOrder, _native.Resampler


def cases() -> dict[str, object]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    rgbx = np.ascontiguousarray(np.dstack([img, np.zeros_like(img[..., :1])]))
    big = rng.integers(0, 256, (3000, 4000, 3), dtype=np.uint8)
    photo = Image.fromarray(img)
    pil = smg_fast.load_processor("qwen2_vl")
    tv = smg_fast.load_processor("qwen2_vl", backend="torchvision")
    h, v = P.HORIZONTAL_FIRST, F.BICUBIC
    return {
        "horizontal 1920->1932 RGB": lambda: _native.resize(img, 1932, 1080, v, h),
        "vertical 1080->1092 RGB": lambda: _native.resize(img, 1920, 1092, v, h),
        "horizontal torch weights": lambda: _native.resize(img, 1932, 1080, v, h, R.TORCH),
        "vertical torch weights": lambda: _native.resize(img, 1920, 1092, v, h, R.TORCH),
        "horizontal 1920->1932 RGBX": lambda: _native.resize(rgbx, 1932, 1080, v, h),
        "4000x3000 -> 1000x750 RGB": lambda: _native.resize(big, 1000, 750, v, h),
        "qwen2_vl pil float32": lambda: pil([photo]),
        "qwen2_vl torchvision float32": lambda: tv([photo]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    args = ap.parse_args()
    smg_fast.set_num_threads(1)
    todo = {name: fn for name, fn in cases().items() if args.only in name}
    times: dict[str, list[float]] = {name: [] for name in todo}
    for fn in todo.values():
        fn()  # warm-up: pools filled, pages touched
    for _ in range(args.rounds):
        for name, fn in todo.items():
            t = time.process_time()
            fn()
            times[name].append(time.process_time() - t)
    info = smg_fast.kernel_info()
    print(f"kernels ran: {info['ran']} (SMG_FAST_ISA cap {info['isa_cap']}), "
          f"{args.rounds} rounds, ms")
    for name, ts in times.items():
        print(f"  {name:<30} median {statistics.median(ts) * 1e3:7.2f}  min {min(ts) * 1e3:7.2f}")


if __name__ == "__main__":
    main()
